use crate::proto::{any_value::Value, AnyValue, KeyValue, ProfilesData, ProfilesDictionary};

/// Turns reference-based attributes into plain ones: `KeyValue.key_strindex`
/// becomes `key` and `AnyValue::StringValueStrindex` becomes `StringValue`,
/// in resource and scope attributes and in the values of the dictionary's
/// attribute table (whose keys stay `key_strindex`, the table's native form).
/// Consumers of other signals ignore these fields, and a string reference can
/// not survive a dictionary that is split or rebuilt elsewhere.
///
/// Returns how many references were resolved. Strings only used by them
/// become orphans; [`super::gc`] or [`super::dedup`] drops them.
pub fn resolve_references(data: &mut ProfilesData) -> usize {
    static NO_STRINGS: Vec<String> = Vec::new();
    let ProfilesData {
        resource_profiles,
        dictionary,
    } = data;
    let (strings, attribute_table) = match dictionary {
        Some(ProfilesDictionary {
            string_table,
            attribute_table,
            ..
        }) => (&*string_table, Some(attribute_table)),
        None => (&NO_STRINGS, None),
    };
    let mut n = 0;
    for rp in resource_profiles.iter_mut() {
        if let Some(r) = &mut rp.resource {
            n += key_values(&mut r.attributes, strings);
        }
        for sp in &mut rp.scope_profiles {
            if let Some(s) = &mut sp.scope {
                n += key_values(&mut s.attributes, strings);
            }
        }
    }
    for a in attribute_table.into_iter().flatten() {
        if let Some(v) = &mut a.value {
            n += any_value(v, strings);
        }
    }
    n
}

fn string(strings: &[String], i: i32) -> String {
    usize::try_from(i)
        .ok()
        .and_then(|i| strings.get(i))
        .cloned()
        .unwrap_or_default()
}

fn key_values(kvs: &mut [KeyValue], strings: &[String]) -> usize {
    let mut n = 0;
    for kv in kvs {
        if kv.key_strindex != 0 {
            // `key` wins if a producer set both, which the proto forbids.
            if kv.key.is_empty() {
                kv.key = string(strings, kv.key_strindex);
            }
            kv.key_strindex = 0;
            n += 1;
        }
        if let Some(v) = &mut kv.value {
            n += any_value(v, strings);
        }
    }
    n
}

fn any_value(v: &mut AnyValue, strings: &[String]) -> usize {
    match &mut v.value {
        Some(Value::StringValueStrindex(i)) => {
            v.value = Some(Value::StringValue(string(strings, *i)));
            1
        }
        Some(Value::ArrayValue(a)) => a.values.iter_mut().map(|x| any_value(x, strings)).sum(),
        Some(Value::KvlistValue(kv)) => key_values(&mut kv.values, strings),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        ArrayValue, InstrumentationScope, KeyValueAndUnit, Resource, ResourceProfiles,
        ScopeProfiles,
    };

    fn strindex(i: i32) -> AnyValue {
        AnyValue {
            value: Some(Value::StringValueStrindex(i)),
        }
    }

    fn plain(s: &str) -> AnyValue {
        AnyValue {
            value: Some(Value::StringValue(s.into())),
        }
    }

    #[test]
    fn references_become_plain_keys_and_strings() {
        let strings = ["", "service.name", "api", "scope.key", "v"]
            .map(String::from)
            .to_vec();
        let kv = |key: &str, key_strindex, value| KeyValue {
            key: key.into(),
            value: Some(value),
            key_strindex,
        };
        let mut d = ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                resource: Some(Resource {
                    attributes: vec![
                        kv("", 1, strindex(2)),
                        // `key` wins when a producer sets both.
                        kv(
                            "explicit",
                            3,
                            AnyValue {
                                value: Some(Value::ArrayValue(ArrayValue {
                                    values: vec![strindex(4), plain("p")],
                                })),
                            },
                        ),
                    ],
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    scope: Some(InstrumentationScope {
                        attributes: vec![kv("", 3, strindex(4))],
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                schema_url: String::new(),
            }],
            dictionary: Some(ProfilesDictionary {
                string_table: strings,
                attribute_table: vec![
                    KeyValueAndUnit::default(),
                    KeyValueAndUnit {
                        key_strindex: 1,
                        value: Some(strindex(2)),
                        unit_strindex: 0,
                    },
                ],
                ..Default::default()
            }),
        };
        assert_eq!(resolve_references(&mut d), 7);
        let r = d.resource_profiles[0].resource.as_ref().unwrap();
        assert_eq!(r.attributes[0], kv("service.name", 0, plain("api")));
        assert_eq!(
            r.attributes[1],
            kv(
                "explicit",
                0,
                AnyValue {
                    value: Some(Value::ArrayValue(ArrayValue {
                        values: vec![plain("v"), plain("p")],
                    })),
                }
            )
        );
        let scope = d.resource_profiles[0].scope_profiles[0]
            .scope
            .as_ref()
            .unwrap();
        assert_eq!(scope.attributes[0], kv("scope.key", 0, plain("v")));
        let attr = &d.dictionary.as_ref().unwrap().attribute_table[1];
        assert_eq!(
            (attr.key_strindex, attr.value.clone()),
            (1, Some(plain("api")))
        );
        assert_eq!(resolve_references(&mut d), 0);
    }
}
