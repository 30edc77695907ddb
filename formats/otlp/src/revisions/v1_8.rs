//! opentelemetry-proto v1.8.0: v1.9.0 plus `Profile.comment_strindices`
//! (7, so every later `Profile` field is one number higher) and
//! `ValueType.aggregation_temporality`. v1.9.0 removed both, so v1.10.0
//! cannot carry them: they are dropped. The dictionary is v1.10.0's type.

use profcol_model::proto;
use profcol_model::{Problem, ValidationError};

/// The generated messages (build.rs).
#[allow(clippy::all, missing_docs)]
pub mod wire {
    include!(concat!(
        env!("OUT_DIR"),
        "/v1_8/opentelemetry.proto.profiles.v1development.rs"
    ));
    include!(concat!(env!("OUT_DIR"), "/v1_8/shared.rs"));
}

/// The v1.10.0 form. Comments are dropped, but only once they are found
/// to name strings: v1.9.0 bytes read as v1.8.0 put the 16 bytes of
/// `profile_id` there, which rarely do.
pub fn upgrade(d: wire::ProfilesData) -> Result<proto::ProfilesData, ValidationError> {
    let strings = d.dictionary.as_ref().map_or(0, |d| d.string_table.len());
    let mut resource_profiles = Vec::with_capacity(d.resource_profiles.len());
    for (r, rp) in d.resource_profiles.into_iter().enumerate() {
        let mut scope_profiles = Vec::with_capacity(rp.scope_profiles.len());
        for (s, sp) in rp.scope_profiles.into_iter().enumerate() {
            let mut profiles = Vec::with_capacity(sp.profiles.len());
            for (p, prof) in sp.profiles.into_iter().enumerate() {
                if let Some((k, &i)) = prof
                    .comment_strindices
                    .iter()
                    .enumerate()
                    .find(|&(_, &i)| !(i == 0 || (i > 0 && (i as usize) < strings)))
                {
                    return Err(ValidationError {
                        path: format!(
                            "resource_profiles[{r}].scope_profiles[{s}].profiles[{p}].comment_strindices[{k}]"
                        ),
                        problem: Problem::OutOfRange {
                            index: i,
                            table: profcol_model::dictionary::Table::String,
                            len: strings,
                        },
                    });
                }
                profiles.push(profile_up(prof));
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
        dictionary: d.dictionary,
    })
}

fn value_type_up(v: wire::ValueType) -> proto::ValueType {
    proto::ValueType {
        type_strindex: v.type_strindex,
        unit_strindex: v.unit_strindex,
    }
}

fn profile_up(p: wire::Profile) -> proto::Profile {
    proto::Profile {
        sample_type: p.sample_type.map(value_type_up),
        samples: p
            .sample
            .into_iter()
            .map(|s| proto::Sample {
                stack_index: s.stack_index,
                attribute_indices: s.attribute_indices,
                link_index: s.link_index,
                values: s.values,
                timestamps_unix_nano: s.timestamps_unix_nano,
            })
            .collect(),
        time_unix_nano: p.time_unix_nano,
        duration_nano: p.duration_nano,
        period_type: p.period_type.map(value_type_up),
        period: p.period,
        profile_id: p.profile_id,
        dropped_attributes_count: p.dropped_attributes_count,
        original_payload_format: p.original_payload_format,
        original_payload: p.original_payload,
        attribute_indices: p.attribute_indices,
    }
}

/// The v1.8.0 form of `d`, whose attributes hold no string references:
/// lossless (no comments, temporality unspecified, as v1.10.0 has them).
pub fn downgrade(d: proto::ProfilesData) -> wire::ProfilesData {
    let value_type = |v: proto::ValueType| wire::ValueType {
        type_strindex: v.type_strindex,
        unit_strindex: v.unit_strindex,
        aggregation_temporality: 0,
    };
    let profile = |p: proto::Profile| wire::Profile {
        sample_type: p.sample_type.map(value_type),
        sample: p
            .samples
            .into_iter()
            .map(|s| wire::Sample {
                stack_index: s.stack_index,
                values: s.values,
                attribute_indices: s.attribute_indices,
                link_index: s.link_index,
                timestamps_unix_nano: s.timestamps_unix_nano,
            })
            .collect(),
        time_unix_nano: p.time_unix_nano,
        duration_nano: p.duration_nano,
        period_type: p.period_type.map(value_type),
        period: p.period,
        comment_strindices: Vec::new(),
        profile_id: p.profile_id,
        dropped_attributes_count: p.dropped_attributes_count,
        original_payload_format: p.original_payload_format,
        original_payload: p.original_payload,
        attribute_indices: p.attribute_indices,
    };
    wire::ProfilesData {
        resource_profiles: d
            .resource_profiles
            .into_iter()
            .map(|r| wire::ResourceProfiles {
                resource: r.resource,
                scope_profiles: r
                    .scope_profiles
                    .into_iter()
                    .map(|s| wire::ScopeProfiles {
                        scope: s.scope,
                        profiles: s.profiles.into_iter().map(profile).collect(),
                        schema_url: s.schema_url,
                    })
                    .collect(),
                schema_url: r.schema_url,
            })
            .collect(),
        dictionary: d.dictionary,
    }
}
