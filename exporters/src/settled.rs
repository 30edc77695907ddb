//! Which profiles of a request earlier attempts settled (delivered or
//! refused for good), so that a retry sends only the rest. Kept in the
//! request's [`Progress::resume`] under the exporter's key, as ranges of
//! profile positions: `{"KEY": {"profiles": N, "settled": [[from, to), ...]}}`.

use profcol_pipeline::component::Progress;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    key: &'static str,
    flags: Vec<bool>,
}

impl Settled {
    pub fn none(key: &'static str, profiles: usize) -> Self {
        Self {
            key,
            flags: vec![false; profiles],
        }
    }

    /// What `progress` says was settled under `key`, for a batch of
    /// `profiles` profiles. A resume written by another exporter, or for a
    /// batch of another size, settles nothing.
    pub fn from_progress(progress: &Progress, key: &'static str, profiles: usize) -> Self {
        let mut s = Self::none(key, profiles);
        let Some(entry) = progress.resume.as_ref().and_then(|r| r.get(key)) else {
            return s;
        };
        if entry.get("profiles").and_then(|n| n.as_u64()) != Some(profiles as u64) {
            return s;
        }
        let ranges = entry.get("settled").and_then(|r| r.as_array());
        for r in ranges.into_iter().flatten() {
            let bound = |i: usize| r.get(i).and_then(|v| v.as_u64()).map(|v| v as usize);
            if let (Some(from), Some(to)) = (bound(0), bound(1)) {
                for f in s.flags.iter_mut().take(to.min(profiles)).skip(from) {
                    *f = true;
                }
            }
        }
        s
    }

    #[inline]
    pub fn is_set(&self, i: usize) -> bool {
        self.flags.get(i).copied().unwrap_or(false)
    }

    pub fn set(&mut self, i: usize) {
        if let Some(f) = self.flags.get_mut(i) {
            *f = true;
        }
    }

    pub fn all(&self) -> bool {
        self.flags.iter().all(|&f| f)
    }

    pub fn any(&self) -> bool {
        self.flags.iter().any(|&f| f)
    }

    /// The `resume` value to record.
    pub fn to_resume(&self) -> serde_json::Value {
        let mut ranges = Vec::new();
        let mut i = 0;
        while i < self.flags.len() {
            if !self.flags[i] {
                i += 1;
                continue;
            }
            let from = i;
            while i < self.flags.len() && self.flags[i] {
                i += 1;
            }
            ranges.push(serde_json::json!([from, i]));
        }
        serde_json::json!({self.key: {"profiles": self.flags.len(), "settled": ranges}})
    }
}
