//! opentelemetry-proto v1.7.0, the first revision with a shared dictionary,
//! before the stack table. Its translation to v1.10.0:
//!
//! - A sample's slice of `Profile.location_indices` becomes a `Stack`.
//! - Several `sample_type`s become one Profile each (v1.10.0 has one per
//!   Profile), in order, each with that type's value of every sample;
//!   `profile_id` and the original payload stay with the first.
//! - Attribute keys become strings of the string table; `attribute_units`
//!   (by key) become each attribute's `unit_strindex`.
//! - v1.7.0 did not reserve entry 0 of any table but the strings, and had
//!   `mapping_index` and `link_index` with presence. A table whose entry 0
//!   is real gets a zero entry in front and its indices one up; an absent
//!   optional index becomes 0, the null reference.
//! - Timestamps were independent of the value; v1.10.0 wants one value per
//!   timestamp when both are set. The value is spread over the timestamps
//!   (the sum stays, the remainder goes to the first ones).
//! - Dropped, as v1.8.0 dropped them: `comment_strindices`,
//!   `default_sample_type_index`, `aggregation_temporality`,
//!   `Location.is_folded`, `Mapping.has_*`.
//!
//! Back to v1.7.0 the stack table becomes each Profile's
//! `location_indices`, and a sample's values per timestamp become their
//! sum: that, and a key with several units, is what v1.7.0 cannot hold.

use ahash::HashMap;

use profcol_model::dictionary::{Interner, Table};
use profcol_model::proto::{self, ZeroEntry};
use profcol_model::{Problem, ValidationError};

use super::Lost;

/// The generated messages (build.rs).
#[allow(clippy::all, missing_docs)]
pub mod wire {
    include!(concat!(
        env!("OUT_DIR"),
        "/v1_7/opentelemetry.proto.profiles.v1development.rs"
    ));
    include!(concat!(env!("OUT_DIR"), "/v1_7/shared.rs"));
}

/// 1 when entry 0 of `table` is a real entry, so indices into it move up.
fn offset<T: Default + PartialEq>(table: &[T]) -> i32 {
    i32::from(table.first().is_some_and(|e| *e != T::default()))
}

/// `table` with a zero entry in front when `offset` says so.
fn with_zero<T: Default>(mut table: Vec<T>, offset: i32) -> Vec<T> {
    if offset == 1 {
        table.insert(0, T::default());
    }
    table
}

fn in_range(i: i32, len: usize) -> bool {
    i == 0 || (i > 0 && (i as usize) < len)
}

fn malformed(path: String, what: String) -> ValidationError {
    ValidationError {
        path,
        problem: Problem::Malformed(what),
    }
}

fn value_type(v: wire::ValueType) -> proto::ValueType {
    proto::ValueType {
        type_strindex: v.type_strindex,
        unit_strindex: v.unit_strindex,
    }
}

/// Index offsets of the tables that get a zero entry.
struct Offsets {
    mappings: i32,
    locations: i32,
    functions: i32,
    links: i32,
    attributes: i32,
}

impl Offsets {
    fn attributes(&self, a: Vec<i32>) -> Vec<i32> {
        if self.attributes == 0 {
            return a;
        }
        a.into_iter().map(|i| i + self.attributes).collect()
    }
}

pub fn upgrade(d: wire::ProfilesData) -> Result<proto::ProfilesData, ValidationError> {
    let wire::ProfilesDictionary {
        mapping_table,
        location_table,
        function_table,
        link_table,
        string_table,
        attribute_table,
        attribute_units,
    } = d.dictionary.unwrap_or_default();
    let off = Offsets {
        mappings: offset(&mapping_table),
        locations: offset(&location_table),
        functions: offset(&function_table),
        links: offset(&link_table),
        attributes: i32::from(attribute_table.first().is_some_and(|e| !e.is_zero())),
    };
    let n_locations = location_table.len();
    let mut units: HashMap<String, i32> = HashMap::default();
    for (k, u) in attribute_units.iter().enumerate() {
        for (i, field) in [
            (u.attribute_key_strindex, "attribute_key_strindex"),
            (u.unit_strindex, "unit_strindex"),
        ] {
            if !in_range(i, string_table.len()) {
                return Err(ValidationError {
                    path: format!("dictionary.attribute_units[{k}].{field}"),
                    problem: Problem::OutOfRange {
                        index: i,
                        table: Table::String,
                        len: string_table.len(),
                    },
                });
            }
        }
        let key = string_table
            .get(u.attribute_key_strindex as usize)
            .cloned()
            .unwrap_or_default();
        units.insert(key, u.unit_strindex);
    }
    let n_strings = string_table.len();
    let mut strings = Interner::from_values(string_table);
    let attribute_table = attribute_table
        .into_iter()
        .map(|kv| {
            let unit_strindex = units.get(&kv.key).copied().unwrap_or(0);
            proto::KeyValueAndUnit {
                key_strindex: strings.intern_by(kv.key.as_str(), |a, b| a == b, str::to_owned),
                value: kv.value,
                unit_strindex,
            }
        })
        .collect();
    let mapping_table = mapping_table
        .into_iter()
        .map(|m| proto::Mapping {
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename_strindex: m.filename_strindex,
            attribute_indices: off.attributes(m.attribute_indices),
        })
        .collect();
    let location_table = location_table
        .into_iter()
        .map(|l| proto::Location {
            mapping_index: l.mapping_index.map_or(0, |i| i + off.mappings),
            address: l.address,
            lines: l
                .line
                .into_iter()
                .map(|mut line| {
                    line.function_index += off.functions;
                    line
                })
                .collect(),
            attribute_indices: off.attributes(l.attribute_indices),
        })
        .collect();

    let mut stacks: Interner<proto::Stack> = Interner::new();
    let mut resource_profiles = Vec::with_capacity(d.resource_profiles.len());
    for (r, rp) in d.resource_profiles.into_iter().enumerate() {
        let mut scope_profiles = Vec::with_capacity(rp.scope_profiles.len());
        for (s, sp) in rp.scope_profiles.into_iter().enumerate() {
            let mut profiles = Vec::with_capacity(sp.profiles.len());
            for (p, prof) in sp.profiles.into_iter().enumerate() {
                let at = || format!("resource_profiles[{r}].scope_profiles[{s}].profiles[{p}]");
                if let Some(k) = prof
                    .comment_strindices
                    .iter()
                    .position(|&i| !in_range(i, n_strings))
                {
                    return Err(ValidationError {
                        path: format!("{}.comment_strindices[{k}]", at()),
                        problem: Problem::OutOfRange {
                            index: prof.comment_strindices[k],
                            table: Table::String,
                            len: n_strings,
                        },
                    });
                }
                if let Some(k) = prof
                    .location_indices
                    .iter()
                    .position(|&l| !in_range(l, n_locations))
                {
                    return Err(ValidationError {
                        path: format!("{}.location_indices[{k}]", at()),
                        problem: Problem::OutOfRange {
                            index: prof.location_indices[k],
                            table: Table::Location,
                            len: n_locations,
                        },
                    });
                }
                profiles.extend(split_profile(prof, &off, &mut stacks, at)?);
            }
            scope_profiles.push(proto::ScopeProfiles {
                scope: sp.scope,
                profiles,
                schema_url: sp.schema_url,
            });
        }
        resource_profiles.push(proto::ResourceProfiles {
            resource: rp.resource,
            scope_profiles,
            schema_url: rp.schema_url,
        });
    }
    Ok(proto::ProfilesData {
        resource_profiles,
        dictionary: Some(proto::ProfilesDictionary {
            mapping_table: with_zero(mapping_table, off.mappings),
            location_table: with_zero(location_table, off.locations),
            function_table: with_zero(function_table, off.functions),
            link_table: with_zero(link_table, off.links),
            string_table: strings.into_values(),
            attribute_table: with_zero(attribute_table, off.attributes),
            stack_table: stacks.into_values(),
        }),
    })
}

/// One v1.7.0 Profile as one v1.10.0 Profile per sample type.
fn split_profile(
    prof: wire::Profile,
    off: &Offsets,
    stacks: &mut Interner<proto::Stack>,
    at: impl Fn() -> String,
) -> Result<Vec<proto::Profile>, ValidationError> {
    let types = prof.sample_type.len();
    let split = types.max(1);
    let attribute_indices = off.attributes(prof.attribute_indices);
    let (mut profile_id, mut payload_format, mut payload) = (
        prof.profile_id,
        prof.original_payload_format,
        prof.original_payload,
    );
    let mut out: Vec<proto::Profile> = (0..split)
        .map(|i| proto::Profile {
            sample_type: prof.sample_type.get(i).copied().map(value_type),
            samples: Vec::with_capacity(prof.sample.len()),
            time_unix_nano: prof.time_nanos.max(0) as u64,
            duration_nano: prof.duration_nanos.max(0) as u64,
            period_type: prof.period_type.map(value_type),
            period: prof.period,
            profile_id: std::mem::take(&mut profile_id),
            dropped_attributes_count: prof.dropped_attributes_count,
            original_payload_format: std::mem::take(&mut payload_format),
            original_payload: std::mem::take(&mut payload),
            attribute_indices: attribute_indices.clone(),
        })
        .collect();
    // Samples share slices of `location_indices`: one lookup per slice.
    let mut slices: HashMap<(i32, i32), i32> = HashMap::default();
    let mut stack = Vec::new();
    for (k, smp) in prof.sample.into_iter().enumerate() {
        let (start, len) = (smp.locations_start_index, smp.locations_length);
        if !smp.value.is_empty() && smp.value.len() != types {
            return Err(malformed(
                format!("{}.sample[{k}].value", at()),
                format!("{} values for {types} sample types", smp.value.len()),
            ));
        }
        let stack_index = match slices.get(&(start, len)) {
            Some(&i) => i,
            None => {
                let slice = usize::try_from(start)
                    .ok()
                    .zip(usize::try_from(len).ok())
                    .and_then(|(s, n)| prof.location_indices.get(s..s.checked_add(n)?))
                    .ok_or_else(|| {
                        malformed(
                            format!("{}.sample[{k}]", at()),
                            format!(
                                "locations {start}..+{len} are not within the profile's {} location_indices",
                                prof.location_indices.len()
                            ),
                        )
                    })?;
                stack.clear();
                stack.extend(slice.iter().map(|&l| l + off.locations));
                let i = stacks.intern_by(
                    stack.as_slice(),
                    |a, b| a.location_indices.as_slice() == b,
                    |b| proto::Stack {
                        location_indices: b.to_vec(),
                    },
                );
                slices.insert((start, len), i);
                i
            }
        };
        let link_index = smp.link_index.map_or(0, |i| i + off.links);
        let mut attribute_indices = off.attributes(smp.attribute_indices);
        let mut timestamps = smp.timestamps_unix_nano;
        let mut value = smp.value;
        // The last profile takes the sample's vectors; the others copies.
        for (i, profile) in out.iter_mut().enumerate() {
            let last = i + 1 == split;
            let (values, timestamps_unix_nano) = match value.get(i) {
                // One value for at most one timestamp: as it is.
                Some(_) if types == 1 && timestamps.len() <= 1 => {
                    (take(&mut value, last), take(&mut timestamps, last))
                }
                Some(&v) => (spread(v, timestamps.len()), take(&mut timestamps, last)),
                None => (Vec::new(), take(&mut timestamps, last)),
            };
            profile.samples.push(proto::Sample {
                stack_index,
                attribute_indices: take(&mut attribute_indices, last),
                link_index,
                values,
                timestamps_unix_nano,
            });
        }
    }
    Ok(out)
}

/// `v` itself for its last user, a copy for the others.
fn take<T: Clone>(v: &mut Vec<T>, last: bool) -> Vec<T> {
    if last {
        std::mem::take(v)
    } else {
        v.clone()
    }
}

/// A value over `n` timestamps as v1.10.0 wants it: one value per
/// timestamp when there are several, summing to `v`.
fn spread(v: i64, n: usize) -> Vec<i64> {
    if n <= 1 {
        return vec![v];
    }
    let (base, rest) = (v.div_euclid(n as i64), v.rem_euclid(n as i64) as usize);
    (0..n).map(|k| base + i64::from(k < rest)).collect()
}

/// The v1.7.0 form of `d`, whose attributes hold no string references.
pub fn downgrade(d: proto::ProfilesData) -> (wire::ProfilesData, Lost) {
    let mut lost = Lost::default();
    let dict = d.dictionary.unwrap_or_default();
    let string = |i: i32| {
        usize::try_from(i)
            .ok()
            .and_then(|i| dict.string_table.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let mut units: HashMap<String, i32> = HashMap::default();
    let mut attribute_units = Vec::new();
    let attribute_table = dict
        .attribute_table
        .iter()
        .map(|a| {
            let key = string(a.key_strindex);
            if a.unit_strindex != 0 && key.is_empty() {
                // A unit for "" would also go to the zero entry.
                lost.attribute_units += 1;
            } else if a.unit_strindex != 0 {
                match units.get(&key) {
                    None => {
                        units.insert(key.clone(), a.unit_strindex);
                        attribute_units.push(wire::AttributeUnit {
                            attribute_key_strindex: a.key_strindex,
                            unit_strindex: a.unit_strindex,
                        });
                    }
                    Some(&u) if u != a.unit_strindex => lost.attribute_units += 1,
                    Some(_) => {}
                }
            }
            proto::KeyValue {
                key,
                value: a.value.clone(),
                key_strindex: 0,
            }
        })
        .collect();
    let stacks = &dict.stack_table;
    let mut spans: HashMap<i32, (i32, i32)> = HashMap::default();
    let mut profile = |p: proto::Profile, lost: &mut Lost| {
        spans.clear();
        let mut location_indices = Vec::new();
        let sample = p
            .samples
            .into_iter()
            .map(|s| {
                let (start, len) = *spans.entry(s.stack_index).or_insert_with(|| {
                    let locs = usize::try_from(s.stack_index)
                        .ok()
                        .and_then(|i| stacks.get(i))
                        .map_or(&[][..], |st| st.location_indices.as_slice());
                    let start = location_indices.len() as i32;
                    location_indices.extend_from_slice(locs);
                    (start, locs.len() as i32)
                });
                let value = if s.values.is_empty() {
                    s.timestamps_unix_nano.len() as i64
                } else {
                    if s.values.len() > 1 {
                        lost.summed_samples += 1;
                    }
                    s.values.iter().fold(0i64, |a, &v| a.wrapping_add(v))
                };
                wire::Sample {
                    locations_start_index: start,
                    locations_length: len,
                    value: vec![value],
                    attribute_indices: s.attribute_indices,
                    link_index: (s.link_index != 0).then_some(s.link_index),
                    timestamps_unix_nano: s.timestamps_unix_nano,
                }
            })
            .collect();
        let value_type = |v: proto::ValueType| wire::ValueType {
            type_strindex: v.type_strindex,
            unit_strindex: v.unit_strindex,
            aggregation_temporality: 0,
        };
        wire::Profile {
            // v1.7.0 has as many values per sample as sample types.
            sample_type: vec![value_type(p.sample_type.unwrap_or_default())],
            sample,
            location_indices,
            time_nanos: i64::try_from(p.time_unix_nano).unwrap_or(i64::MAX),
            duration_nanos: i64::try_from(p.duration_nano).unwrap_or(i64::MAX),
            period_type: p.period_type.map(value_type),
            period: p.period,
            comment_strindices: Vec::new(),
            default_sample_type_index: 0,
            profile_id: p.profile_id,
            dropped_attributes_count: p.dropped_attributes_count,
            original_payload_format: p.original_payload_format,
            original_payload: p.original_payload,
            attribute_indices: p.attribute_indices,
        }
    };
    let resource_profiles = d
        .resource_profiles
        .into_iter()
        .map(|r| wire::ResourceProfiles {
            resource: r.resource,
            scope_profiles: r
                .scope_profiles
                .into_iter()
                .map(|s| wire::ScopeProfiles {
                    scope: s.scope,
                    profiles: s
                        .profiles
                        .into_iter()
                        .map(|p| profile(p, &mut lost))
                        .collect(),
                    schema_url: s.schema_url,
                })
                .collect(),
            schema_url: r.schema_url,
        })
        .collect();
    let dictionary = wire::ProfilesDictionary {
        mapping_table: dict
            .mapping_table
            .into_iter()
            .map(|m| wire::Mapping {
                memory_start: m.memory_start,
                memory_limit: m.memory_limit,
                file_offset: m.file_offset,
                filename_strindex: m.filename_strindex,
                attribute_indices: m.attribute_indices,
                ..Default::default()
            })
            .collect(),
        location_table: dict
            .location_table
            .into_iter()
            .map(|l| wire::Location {
                mapping_index: (l.mapping_index != 0).then_some(l.mapping_index),
                address: l.address,
                line: l.lines,
                is_folded: false,
                attribute_indices: l.attribute_indices,
            })
            .collect(),
        function_table: dict.function_table,
        link_table: dict.link_table,
        string_table: dict.string_table,
        attribute_table,
        attribute_units,
    };
    (
        wire::ProfilesData {
            resource_profiles,
            dictionary: Some(dictionary),
        },
        lost,
    )
}
