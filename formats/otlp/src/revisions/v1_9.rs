//! opentelemetry-proto v1.9.0: v1.10.0 but for the field numbers of
//! `Sample` (values 2, attribute_indices 3, link_index 4 there). The
//! dictionary and `ValueType` are v1.10.0's types, so only profiles and
//! samples are rebuilt, their vectors moved, not copied.

use profcol_model::proto;

/// The generated messages (build.rs).
#[allow(clippy::all, missing_docs)]
pub mod wire {
    include!(concat!(
        env!("OUT_DIR"),
        "/v1_9/opentelemetry.proto.profiles.v1development.rs"
    ));
    include!(concat!(env!("OUT_DIR"), "/v1_9/shared.rs"));
}

/// The v1.10.0 form: nothing to check, nothing lost.
pub fn upgrade(d: wire::ProfilesData) -> proto::ProfilesData {
    proto::ProfilesData {
        resource_profiles: d
            .resource_profiles
            .into_iter()
            .map(|r| proto::ResourceProfiles {
                resource: r.resource,
                scope_profiles: r
                    .scope_profiles
                    .into_iter()
                    .map(|s| proto::ScopeProfiles {
                        scope: s.scope,
                        profiles: s.profiles.into_iter().map(profile_up).collect(),
                        schema_url: s.schema_url,
                    })
                    .collect(),
                schema_url: r.schema_url,
            })
            .collect(),
        dictionary: d.dictionary,
    }
}

fn profile_up(p: wire::Profile) -> proto::Profile {
    proto::Profile {
        sample_type: p.sample_type,
        samples: p.samples.into_iter().map(sample_up).collect(),
        time_unix_nano: p.time_unix_nano,
        duration_nano: p.duration_nano,
        period_type: p.period_type,
        period: p.period,
        profile_id: p.profile_id,
        dropped_attributes_count: p.dropped_attributes_count,
        original_payload_format: p.original_payload_format,
        original_payload: p.original_payload,
        attribute_indices: p.attribute_indices,
    }
}

fn sample_up(s: wire::Sample) -> proto::Sample {
    proto::Sample {
        stack_index: s.stack_index,
        attribute_indices: s.attribute_indices,
        link_index: s.link_index,
        values: s.values,
        timestamps_unix_nano: s.timestamps_unix_nano,
    }
}

/// The v1.9.0 form of `d`, whose attributes hold no string references
/// (v1.9.0 has no `key_strindex` nor `string_value_strindex`): lossless.
pub fn downgrade(d: proto::ProfilesData) -> wire::ProfilesData {
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
                        profiles: s.profiles.into_iter().map(profile_down).collect(),
                        schema_url: s.schema_url,
                    })
                    .collect(),
                schema_url: r.schema_url,
            })
            .collect(),
        dictionary: d.dictionary,
    }
}

fn profile_down(p: proto::Profile) -> wire::Profile {
    wire::Profile {
        sample_type: p.sample_type,
        samples: p.samples.into_iter().map(sample_down).collect(),
        time_unix_nano: p.time_unix_nano,
        duration_nano: p.duration_nano,
        period_type: p.period_type,
        period: p.period,
        profile_id: p.profile_id,
        dropped_attributes_count: p.dropped_attributes_count,
        original_payload_format: p.original_payload_format,
        original_payload: p.original_payload,
        attribute_indices: p.attribute_indices,
    }
}

fn sample_down(s: proto::Sample) -> wire::Sample {
    wire::Sample {
        stack_index: s.stack_index,
        values: s.values,
        attribute_indices: s.attribute_indices,
        link_index: s.link_index,
        timestamps_unix_nano: s.timestamps_unix_nano,
    }
}
