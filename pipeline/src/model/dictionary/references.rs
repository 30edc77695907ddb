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
