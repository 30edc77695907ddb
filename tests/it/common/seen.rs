//! Profiles resolved to what a user reads, to compare what two paths
//! (profcol and the Collector, two transports) delivered.

use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use profcol_model::dictionary::Lookup;
use profcol_model::proto::{any_value::Value, AnyValue, KeyValue, ProfilesData};
use profcol_model::resolved::{resolve, Detail, ResolvedProfile};

/// One profile as a user reads it, plus what the resolved view leaves out
/// (times, ids, counts of dropped attributes, schema URLs, timestamps).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seen {
    resolved: String,
    profile_id: String,
    time_unix_nano: u64,
    duration_nano: u64,
    dropped_attributes_count: u32,
    resource_schema_url: String,
    resource_dropped_attributes_count: u32,
    scope_schema_url: String,
    scope_dropped_attributes_count: u32,
    /// Every sample's timestamps, sorted.
    timestamps: Vec<u64>,
    /// The type of each resource, scope and profile attribute (the
    /// resolved view writes `1` for the int and for the string).
    types: Vec<String>,
}

/// Every profile of `data`, in document order.
pub fn seen(data: &ProfilesData) -> Vec<Seen> {
    let view = resolve(data, Detail::Full);
    let lookup = Lookup::of(data);
    let mut resolved = view.profiles.iter();
    let mut out = Vec::new();
    for rp in &data.resource_profiles {
        let res = rp.resource.clone().unwrap_or_default();
        for sp in &rp.scope_profiles {
            let scope = sp.scope.clone().unwrap_or_default();
            for p in &sp.profiles {
                let r: &ResolvedProfile = resolved.next().expect("one view per profile");
                let mut timestamps: Vec<u64> = p
                    .samples
                    .iter()
                    .flat_map(|s| s.timestamps_unix_nano.iter().copied())
                    .collect();
                timestamps.sort_unstable();
                out.push(Seen {
                    resolved: r.to_string(),
                    profile_id: format!("{:02x?}", p.profile_id),
                    time_unix_nano: p.time_unix_nano,
                    duration_nano: p.duration_nano,
                    dropped_attributes_count: p.dropped_attributes_count,
                    resource_schema_url: rp.schema_url.clone(),
                    resource_dropped_attributes_count: res.dropped_attributes_count,
                    scope_schema_url: sp.schema_url.clone(),
                    scope_dropped_attributes_count: scope.dropped_attributes_count,
                    timestamps,
                    types: types(
                        &lookup,
                        rp.resource.as_ref().map_or(&[], |r| &r.attributes[..]),
                        sp.scope.as_ref().map_or(&[], |s| &s.attributes[..]),
                        &p.attribute_indices,
                    ),
                });
            }
        }
    }
    out
}

pub fn all_seen(requests: &[ExportProfilesServiceRequest]) -> Vec<Seen> {
    let mut out: Vec<Seen> = requests
        .iter()
        .flat_map(|r| {
            seen(&ProfilesData {
                resource_profiles: r.resource_profiles.clone(),
                dictionary: r.dictionary.clone(),
            })
        })
        .collect();
    out.sort();
    out
}

/// `None` when both hold the same profiles (in any order and batching);
/// else the first difference, naming the field.
pub fn difference(expected: &[Seen], got: &[Seen]) -> Option<String> {
    if expected.len() != got.len() {
        return Some(format!(
            "{} profiles expected, {} arrived",
            expected.len(),
            got.len()
        ));
    }
    for (i, (e, g)) in expected.iter().zip(got).enumerate() {
        if e == g {
            continue;
        }
        let field = |name: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
            format!("profile {i}: {name}: expected {a:?}, got {b:?}")
        };
        if e.resolved != g.resolved {
            let diff = similar::TextDiff::from_lines(&e.resolved, &g.resolved)
                .unified_diff()
                .context_radius(1)
                .to_string();
            return Some(format!("profile {i}: resolved view differs:\n{diff}"));
        }
        return Some(if e.profile_id != g.profile_id {
            field("profile_id", &e.profile_id, &g.profile_id)
        } else if e.time_unix_nano != g.time_unix_nano {
            field("time_unix_nano", &e.time_unix_nano, &g.time_unix_nano)
        } else if e.duration_nano != g.duration_nano {
            field("duration_nano", &e.duration_nano, &g.duration_nano)
        } else if e.dropped_attributes_count != g.dropped_attributes_count {
            field(
                "dropped_attributes_count",
                &e.dropped_attributes_count,
                &g.dropped_attributes_count,
            )
        } else if e.resource_schema_url != g.resource_schema_url {
            field(
                "resource.schema_url",
                &e.resource_schema_url,
                &g.resource_schema_url,
            )
        } else if e.resource_dropped_attributes_count != g.resource_dropped_attributes_count {
            field(
                "resource.dropped_attributes_count",
                &e.resource_dropped_attributes_count,
                &g.resource_dropped_attributes_count,
            )
        } else if e.scope_schema_url != g.scope_schema_url {
            field("scope.schema_url", &e.scope_schema_url, &g.scope_schema_url)
        } else if e.scope_dropped_attributes_count != g.scope_dropped_attributes_count {
            field(
                "scope.dropped_attributes_count",
                &e.scope_dropped_attributes_count,
                &g.scope_dropped_attributes_count,
            )
        } else if e.types != g.types {
            field("attribute types", &e.types, &g.types)
        } else {
            field(
                "samples' timestamps",
                &e.timestamps.len(),
                &g.timestamps.len(),
            )
        });
    }
    None
}

/// `resource.k: Int`, ... for every attribute of the resource, the scope
/// and the profile, sorted.
fn types<'a>(
    lookup: &Lookup<'a>,
    resource: &'a [KeyValue],
    scope: &'a [KeyValue],
    profile: &[i32],
) -> Vec<String> {
    let mut out: Vec<String> = resource
        .iter()
        .map(|kv| ("resource", lookup.key_of(kv), kv.value.as_ref()))
        .chain(
            scope
                .iter()
                .map(|kv| ("scope", lookup.key_of(kv), kv.value.as_ref())),
        )
        .map(|(at, k, v)| format!("{at}.{k}: {}", type_of(lookup, v)))
        .chain(profile.iter().map(|&i| {
            let a = lookup.attribute(i);
            format!(
                "profile.{}: {}",
                lookup.string(a.key_strindex),
                type_of(lookup, a.value.as_ref())
            )
        }))
        .collect();
    out.sort_unstable();
    out
}

/// A value's type, and its elements' types: `Slice[Str, Int]`,
/// `Map{a: Int}` (keys sorted).
fn type_of<'a>(lookup: &Lookup<'a>, v: Option<&'a AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        None => "Empty".into(),
        Some(Value::StringValue(_) | Value::StringValueStrindex(_)) => "Str".into(),
        Some(Value::BoolValue(_)) => "Bool".into(),
        Some(Value::IntValue(_)) => "Int".into(),
        Some(Value::DoubleValue(_)) => "Double".into(),
        Some(Value::BytesValue(_)) => "Bytes".into(),
        Some(Value::ArrayValue(a)) => format!(
            "Slice[{}]",
            a.values
                .iter()
                .map(|x| type_of(lookup, Some(x)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(Value::KvlistValue(m)) => {
            let mut items: Vec<String> = m
                .values
                .iter()
                .map(|kv| {
                    format!(
                        "{}: {}",
                        lookup.key_of(kv),
                        type_of(lookup, kv.value.as_ref())
                    )
                })
                .collect();
            items.sort_unstable();
            format!("Map{{{}}}", items.join(", "))
        }
    }
}
