//! Where the export of a part-delivered batch resumes, kept in the
//! request's progress (and so across a restart with a persistent queue):
//! the clock the batch's chunks were cut by, so that every attempt cuts the
//! same chunks, and how many of them are done (delivered or refused for
//! good).

use serde::{Deserialize, Serialize};

use profcol_pipeline::component::Progress;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    /// Stands in for missing profile start times.
    pub now_unix_nano: u64,
    /// Chunks, in conversion order, delivered or refused for good.
    pub done: usize,
}

impl Resume {
    /// The resume point `progress` records, or a fresh one at `now`.
    pub fn of(progress: &Progress, now_unix_nano: u64) -> Self {
        progress
            .resume
            .as_ref()
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or(Self {
                now_unix_nano,
                done: 0,
            })
    }

    pub fn to_progress(self, delivered: u64, rejected: u64) -> Progress {
        Progress {
            delivered,
            rejected,
            resume: Some(serde_json::to_value(self).expect("a resume point serializes")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_point_survives_its_progress_and_defaults_when_absent() {
        let r = Resume {
            now_unix_nano: 1_700_000_000_000_000_000,
            done: 3,
        };
        let p = r.to_progress(120, 7);
        assert_eq!((p.delivered, p.rejected), (120, 7));
        let json = serde_json::to_vec(&p).unwrap();
        let back: Progress = serde_json::from_slice(&json).unwrap();
        assert_eq!(Resume::of(&back, 5), r);
        assert_eq!(
            Resume::of(&Progress::default(), 5),
            Resume {
                now_unix_nano: 5,
                done: 0
            }
        );
    }
}
