//! Which OTLP profiles go into which pprof file.
//!
//! A pprof file describes one program (one resource) and every sample in it
//! carries one value per sample type. So profiles of one resource that share
//! a sample type go into one file, in order; profiles with different sample
//! types go into separate files, or, with `merge_sample_types`, into one file
//! with several sample types when they line up: the same number of profiles
//! with the same number of samples, and sample by sample the same stack,
//! attributes and link (as a pprof profile converted to OTLP is shaped).

use profcol_model::proto::{
    any_value::Value, Profile, ProfilesData, ProfilesDictionary, Resource, Sample,
};

use super::{keys, PprofError, ToPprofOptions};

/// One profile of a `ProfilesData`: `resource_profiles[r].scope_profiles[scope].profiles[profile]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileRef {
    pub scope: usize,
    pub profile: usize,
}

/// A sample type by value (`cpu`/`nanoseconds`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SampleType {
    pub r#type: String,
    pub unit: String,
}

/// One pprof file to write: the profiles of one resource it holds and what a
/// file name template needs to know about it.
#[derive(Debug, Clone)]
pub struct PprofFile {
    /// Index into `ProfilesData.resource_profiles`.
    pub resource: usize,
    /// One list of profiles per pprof sample type, in `sample_types` order.
    /// With several lists they line up profile by profile, sample by sample.
    pub columns: Vec<Vec<ProfileRef>>,
    pub sample_types: Vec<SampleType>,
    /// The resource's `service.name`, else `unknown_service:` and its
    /// `process.executable.name`, if it has one.
    pub service_name: Option<String>,
    /// Earliest start time of the profiles (0 if none says).
    pub time_unix_nano: u64,
    /// `profile_id` of the first profile that has one.
    pub profile_id: Vec<u8>,
    /// OTLP samples this file holds (the unit profcol counts in).
    pub otlp_samples: u64,
}

impl PprofFile {
    /// The sample type names joined with `+` (`samples+cpu`), for file names.
    pub fn sample_type_name(&self) -> String {
        let names: Vec<&str> = self
            .sample_types
            .iter()
            .map(|t| t.r#type.as_str())
            .collect();
        names.join("+")
    }
}

/// String `idx` of the dictionary; index 0 of an empty string table is the
/// zero value `""`, as `model::validate` accepts it.
pub(super) fn string<'a>(
    dict: &'a ProfilesDictionary,
    idx: i32,
    what: &str,
) -> Result<&'a str, PprofError> {
    match usize::try_from(idx)
        .ok()
        .and_then(|i| dict.string_table.get(i))
    {
        Some(s) => Ok(s),
        None if idx == 0 && dict.string_table.is_empty() => Ok(""),
        None => Err(PprofError::InvalidOtlp(format!(
            "{what}: string index {idx} out of range"
        ))),
    }
}

/// Key of a resource or scope attribute, resolving `key_strindex` if the
/// sender used the string table.
pub(super) fn kv_key<'a>(
    dict: &'a ProfilesDictionary,
    kv: &'a profcol_model::proto::KeyValue,
) -> &'a str {
    if kv.key.is_empty() && kv.key_strindex > 0 {
        return dict
            .string_table
            .get(kv.key_strindex as usize)
            .map(String::as_str)
            .unwrap_or("");
    }
    &kv.key
}

/// The resource's `service.name`, else what the semantic conventions have
/// SDKs put there without one: `unknown_service:` and
/// `process.executable.name` (the eBPF profiler sends no `service.name`,
/// one resource per process).
pub(super) fn service_name(
    dict: &ProfilesDictionary,
    resource: Option<&Resource>,
) -> Option<String> {
    let text = |key: &str| {
        let kv = resource?
            .attributes
            .iter()
            .find(|kv| kv_key(dict, kv) == key)?;
        match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.clone()),
            Value::StringValueStrindex(i) => dict.string_table.get(*i as usize).cloned(),
            _ => None,
        }
    };
    text(keys::SERVICE_NAME).or_else(|| {
        text(keys::PROCESS_EXECUTABLE_NAME)
            .filter(|n| !n.is_empty())
            .map(|n| format!("unknown_service:{n}"))
    })
}

/// Profile attributes that become labels of every sample: all but the
/// `pprof.*` ones, which describe the encoding.
pub(super) fn label_attributes<'a>(
    dict: &'a ProfilesDictionary,
    p: &'a Profile,
) -> impl Iterator<Item = i32> + 'a {
    p.attribute_indices.iter().copied().filter(move |&i| {
        let key = usize::try_from(i)
            .ok()
            .and_then(|i| dict.attribute_table.get(i))
            .and_then(|a| dict.string_table.get(a.key_strindex as usize));
        // Out-of-range indices are kept so the writer reports them.
        !key.is_some_and(|k| k.starts_with(keys::PPROF_PREFIX))
    })
}

fn sample_type(dict: &ProfilesDictionary, p: &Profile) -> Result<SampleType, PprofError> {
    let vt = p.sample_type.unwrap_or_default();
    Ok(SampleType {
        r#type: string(dict, vt.type_strindex, "sample_type")?.to_owned(),
        unit: string(dict, vt.unit_strindex, "sample_type")?.to_owned(),
    })
}

fn same_identity(a: &Sample, b: &Sample) -> bool {
    a.stack_index == b.stack_index
        && a.link_index == b.link_index
        && a.attribute_indices == b.attribute_indices
}

/// Whether two lists of profiles can share pprof samples (see module docs).
fn lines_up(dict: &ProfilesDictionary, profiles: &[&Profile], a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(&ia, &ib)| {
            let (pa, pb) = (profiles[ia], profiles[ib]);
            pa.samples.len() == pb.samples.len()
                && label_attributes(dict, pa).eq(label_attributes(dict, pb))
                && pa
                    .samples
                    .iter()
                    .zip(&pb.samples)
                    .all(|(x, y)| same_identity(x, y))
        })
}

/// Splits `data` into pprof files (see module docs), in resource order.
pub fn plan_files(
    data: &ProfilesData,
    opts: &ToPprofOptions,
) -> Result<Vec<PprofFile>, PprofError> {
    let dict = profcol_model::proto::dictionary_of(data);
    let mut files = Vec::new();
    for (r, rp) in data.resource_profiles.iter().enumerate() {
        // Flatten the resource's profiles so refs can be compared by position.
        let mut refs = Vec::new();
        let mut profiles = Vec::new();
        for (s, sp) in rp.scope_profiles.iter().enumerate() {
            for (i, p) in sp.profiles.iter().enumerate() {
                refs.push(ProfileRef {
                    scope: s,
                    profile: i,
                });
                profiles.push(p);
            }
        }
        if profiles.is_empty() {
            continue;
        }
        // Group by sample type in order of first appearance; a resource has
        // a handful of sample types, so a short scan is the right tool.
        // Groups hold positions in `profiles`.
        let mut groups: Vec<(SampleType, Vec<usize>)> = Vec::new();
        for (pos, p) in profiles.iter().enumerate() {
            let st = sample_type(dict, p)?;
            match groups.iter_mut().find(|(t, _)| *t == st) {
                Some((_, list)) => list.push(pos),
                None => groups.push((st, vec![pos])),
            }
        }

        // Clusters of groups that become one file each.
        let mut clusters: Vec<Vec<(SampleType, Vec<usize>)>> = Vec::new();
        for g in groups {
            let joined = opts.merge_sample_types
                && clusters.iter_mut().any(|c| {
                    let fits = lines_up(dict, &profiles, &c[0].1, &g.1);
                    if fits {
                        c.push(g.clone());
                    }
                    fits
                });
            if !joined {
                clusters.push(vec![g]);
            }
        }

        let service = service_name(dict, rp.resource.as_ref());
        for c in clusters {
            let all = c.iter().flat_map(|(_, l)| l).map(|&pos| profiles[pos]);
            let time = all
                .clone()
                .map(|p| p.time_unix_nano)
                .filter(|&t| t != 0)
                .min()
                .unwrap_or(0);
            let profile_id = all
                .clone()
                .map(|p| &p.profile_id)
                .find(|id| !id.is_empty())
                .cloned()
                .unwrap_or_default();
            let otlp_samples = all.map(|p| p.samples.len() as u64).sum();
            let (sample_types, columns) = c
                .into_iter()
                .map(|(t, l)| (t, l.into_iter().map(|pos| refs[pos]).collect()))
                .unzip();
            files.push(PprofFile {
                resource: r,
                columns,
                sample_types,
                service_name: service.clone(),
                time_unix_nano: time,
                profile_id,
                otlp_samples,
            });
        }
    }
    Ok(files)
}
