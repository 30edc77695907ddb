//! One batch being filled, what keeps batches apart, and splitting an input
//! that is larger than `send_batch_max_size`.

use std::sync::Arc;

use profcol_model::dictionary::{extract, Merger};
use profcol_model::memory::Held;
use profcol_model::proto::{ResourceProfiles, ScopeProfiles};
use profcol_model::{profile_sample_count, BatchMeta, Origin, ProfileBatch};

use super::Sizer;

/// What keeps batches apart: the client's values of each metadata key
/// (unset and empty are different, as in the Collector) and the origin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    metadata: Vec<Option<Vec<String>>>,
    origin: OriginKey,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum OriginKey {
    Otlp,
    Pprof,
    /// Project and envelope headers, as JSON text.
    Sentry(String, String),
}

impl Key {
    pub(super) fn of(meta: &BatchMeta, keys: &[String]) -> Self {
        let metadata = keys
            .iter()
            .map(|k| {
                let values: Vec<String> = meta
                    .metadata
                    .iter()
                    .filter(|(name, _)| name.eq_ignore_ascii_case(k))
                    .map(|(_, v)| v.clone())
                    .collect();
                (!values.is_empty()).then_some(values)
            })
            .collect();
        let origin = match &meta.origin {
            Origin::Otlp => OriginKey::Otlp,
            Origin::Pprof => OriginKey::Pprof,
            Origin::Sentry {
                project_id,
                envelope_header,
            } => OriginKey::Sentry(project_id.clone(), envelope_header.to_string()),
        };
        Self { metadata, origin }
    }
}

/// A batch being filled: the first input as it came (sent as it is if no
/// other joins it), then a merger of all of them.
pub(crate) struct Pending {
    pub generation: u64,
    /// In the sizer's unit: the sum of the inputs' sizes.
    pub size: u64,
    first: Option<ProfileBatch>,
    merger: Option<Merger>,
    meta: BatchMeta,
    /// The memory reservations of the inputs, released once the merged
    /// batch holds its own.
    shares: Vec<Arc<Held>>,
}

impl Pending {
    pub(super) fn new(generation: u64) -> Self {
        Self {
            generation,
            size: 0,
            first: None,
            merger: None,
            meta: BatchMeta::default(),
            shares: Vec::new(),
        }
    }

    /// Adds `batch`, of `size` in the sizer's unit.
    pub(super) fn push(&mut self, mut batch: ProfileBatch, size: u64) {
        self.size += size;
        if self.first.is_none() && self.merger.is_none() {
            self.first = Some(batch);
            return;
        }
        if let Some(mut first) = self.first.take() {
            self.shares.extend(first.meta.memory.take());
            self.meta = std::mem::take(&mut first.meta);
            self.merger = Some(Merger::grouping(first.into_data()));
        }
        self.shares.extend(batch.meta.memory.take());
        self.meta.absorb(&batch.meta);
        self.merger
            .as_mut()
            .expect("made above")
            .push(batch.into_data());
    }

    /// The batch to send. Its metadata keeps only the `metadata_keys`
    /// entries (what the batch was grouped by), as the Collector's batch
    /// carries only those.
    pub(super) fn finish(self, keys: &[String]) -> ProfileBatch {
        let mut batch = match (self.first, self.merger) {
            (Some(first), _) => first,
            (None, Some(merger)) => {
                let mut b = ProfileBatch::new(merger.finish()).with_meta(self.meta);
                b.meta.memory = Held::merge(&self.shares, b.held_bytes());
                // The inputs' reservations give way to the merged one's.
                drop(self.shares);
                b
            }
            (None, None) => ProfileBatch::default(),
        };
        batch
            .meta
            .metadata
            .retain(|(k, _)| keys.iter().any(|m| m.eq_ignore_ascii_case(k)));
        batch
    }
}

/// Splits `batch` into self-contained parts of at most `max` samples (or
/// bytes of their profiles, the dictionary not counted, as exporterhelper
/// counts them), between profiles (each part's dictionary holds only what
/// it uses). A profile larger than `max` makes a part of its own.
pub(crate) fn split_at_profiles(batch: ProfileBatch, max: u64, sizer: Sizer) -> Vec<ProfileBatch> {
    let meta = batch.meta.clone();
    let data = batch.into_data();
    let dict = data.dictionary.unwrap_or_default();
    let mut parts: Vec<Vec<ResourceProfiles>> = Vec::new();
    let mut current: Vec<ResourceProfiles> = Vec::new();
    let mut in_current = 0u64;
    for mut rp in data.resource_profiles {
        let scopes = std::mem::take(&mut rp.scope_profiles);
        for mut sp in scopes {
            let profiles = std::mem::take(&mut sp.profiles);
            for p in profiles {
                let n = match sizer {
                    Sizer::Items => profile_sample_count(&p),
                    Sizer::Bytes => prost::Message::encoded_len(&p) as u64,
                };
                if in_current > 0 && in_current + n > max {
                    parts.push(std::mem::take(&mut current));
                    in_current = 0;
                }
                push_profile(&mut current, &rp, &sp, p);
                in_current += n;
            }
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    let mut out: Vec<ProfileBatch> = parts
        .into_iter()
        .map(|resources| ProfileBatch::new(extract(&dict, resources)).with_meta(meta.clone()))
        .collect();
    // The input's reservation, shared out by size: each part holds its own.
    if let Some(held) = &meta.memory {
        let bytes: Vec<usize> = out.iter().map(|b| b.held_bytes()).collect();
        let shares = [held.clone()];
        for (b, n) in out.iter_mut().zip(bytes) {
            b.meta.memory = Held::merge(&shares, n);
        }
    }
    out
}

/// Appends profile `p` of resource `rp` and scope `sp` to `parts`, under a
/// copy of that resource and scope (reused while they are the last ones).
fn push_profile(
    part: &mut Vec<ResourceProfiles>,
    rp: &ResourceProfiles,
    sp: &ScopeProfiles,
    p: profcol_model::proto::Profile,
) {
    let same_resource = part
        .last()
        .is_some_and(|r| r.resource == rp.resource && r.schema_url == rp.schema_url);
    if !same_resource {
        part.push(ResourceProfiles {
            resource: rp.resource.clone(),
            schema_url: rp.schema_url.clone(),
            scope_profiles: Vec::new(),
        });
    }
    let r = part.last_mut().expect("pushed above");
    let same_scope = r
        .scope_profiles
        .last()
        .is_some_and(|s| s.scope == sp.scope && s.schema_url == sp.schema_url);
    if !same_scope {
        r.scope_profiles.push(ScopeProfiles {
            scope: sp.scope.clone(),
            schema_url: sp.schema_url.clone(),
            profiles: Vec::new(),
        });
    }
    r.scope_profiles
        .last_mut()
        .expect("pushed above")
        .profiles
        .push(p);
}
