//! Repairs of the mistakes real producers make, so that their requests are
//! accepted as they meant them instead of lost (receiver key
//! `on_invalid: repair`). Every repair is counted by kind:
//!
//! - `index_0_real_entry`: a table whose entry 0 is a real entry where the
//!   proto keeps the zero value (opentelemetry-sdk-extension-profiling
//!   0.63b4 on v1.9.0 does this to four tables). A zero entry goes in front
//!   and every reference to the table moves up by one, so each still names
//!   the entry it named. Counted per table.
//! - `string_index_out_of_range`, `attribute_index_out_of_range`: the
//!   reference is dropped; a string reference becomes 0 (the empty string),
//!   an attribute index leaves its list. Counted per reference.
//! - `empty_sample`: a Sample with neither values nor timestamps is
//!   dropped. Counted per sample.
//!
//! Duplicate dictionary entries are not a mistake to repair: they carry no
//! meaning, and `dictionary_dedup` removes them.

use crate::proto::{any_value::Value, AnyValue, KeyValue, ProfilesData, ProfilesDictionary};

use super::dictionary::{visit, PerTable, Table};
use super::profiles_mut;
use super::validate::tables_without_zero_value;

/// What [`repair`] changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repairs {
    /// Tables that got a zero entry in front of their real entry 0.
    pub shifted: Vec<Table>,
    pub string_indices: u64,
    pub attribute_indices: u64,
    pub empty_samples: u64,
}

impl Repairs {
    pub fn is_empty(&self) -> bool {
        self.counts().is_empty()
    }

    /// `(kind, count)` of each kind that happened, in the order of the
    /// module docs; `kind` is the label of `profcol_receiver_repairs_total`.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        [
            ("index_0_real_entry", self.shifted.len() as u64),
            ("string_index_out_of_range", self.string_indices),
            ("attribute_index_out_of_range", self.attribute_indices),
            ("empty_sample", self.empty_samples),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .collect()
    }
}

/// Repairs `data` in place (see the module docs). Whatever it cannot
/// repair (a stack index out of range, say) is left for validation.
pub fn repair(data: &mut ProfilesData) -> Repairs {
    let shifted = insert_zero_entries(data);
    let (string_indices, attribute_indices) = drop_out_of_range(data);
    Repairs {
        shifted,
        string_indices,
        attribute_indices,
        empty_samples: drop_empty_samples(data),
    }
}

/// A zero entry in front of each table whose entry 0 is real, and every
/// reference to it one up.
fn insert_zero_entries(data: &mut ProfilesData) -> Vec<Table> {
    let ProfilesData {
        resource_profiles,
        dictionary: Some(dict),
    } = data
    else {
        return Vec::new();
    };
    let shifted = tables_without_zero_value(dict);
    if shifted.is_empty() {
        return shifted;
    }
    let mut up = |t: Table, i: &mut i32| {
        if t != Table::String && *i >= 0 && shifted.contains(&t) {
            *i += 1;
        }
    };
    visit::resources_mut(resource_profiles, &mut up);
    let real = |t| usize::from(!shifted.contains(&t));
    for m in skip(&mut dict.mapping_table, real(Table::Mapping)) {
        visit::mapping_mut(m, &mut up);
    }
    for l in skip(&mut dict.location_table, real(Table::Location)) {
        visit::location_mut(l, &mut up);
    }
    for s in skip(&mut dict.stack_table, real(Table::Stack)) {
        visit::stack_mut(s, &mut up);
    }
    if shifted.contains(&Table::String) {
        strings_up(resource_profiles, dict, &shifted);
    }
    for &t in &shifted {
        match t {
            Table::String => dict.string_table.insert(0, String::new()),
            Table::Mapping => dict.mapping_table.insert(0, Default::default()),
            Table::Location => dict.location_table.insert(0, Default::default()),
            Table::Function => dict.function_table.insert(0, Default::default()),
            Table::Link => dict.link_table.insert(0, Default::default()),
            Table::Attribute => dict.attribute_table.insert(0, Default::default()),
            Table::Stack => dict.stack_table.insert(0, Default::default()),
        }
    }
    shifted
}

/// The entries of `table` from `from` on: a table that kept its zero value
/// at 0 keeps it as it is, whatever the other tables do.
fn skip<T>(table: &mut [T], from: usize) -> &mut [T] {
    let from = from.min(table.len());
    &mut table[from..]
}

/// Every string reference one up, but a `KeyValue.key_strindex` of 0: that
/// one means "the key is in `key`", not `string_table[0]`.
fn strings_up(
    resources: &mut [crate::proto::ResourceProfiles],
    dict: &mut ProfilesDictionary,
    shifted: &[Table],
) {
    fn up(i: &mut i32) {
        if *i >= 0 {
            *i += 1;
        }
    }
    fn key_values(kvs: &mut [KeyValue]) {
        for kv in kvs {
            if kv.key_strindex != 0 {
                up(&mut kv.key_strindex);
            }
            if let Some(v) = &mut kv.value {
                any_value(v);
            }
        }
    }
    fn any_value(v: &mut AnyValue) {
        match &mut v.value {
            Some(Value::StringValueStrindex(i)) => up(i),
            Some(Value::ArrayValue(a)) => a.values.iter_mut().for_each(any_value),
            Some(Value::KvlistValue(kv)) => key_values(&mut kv.values),
            _ => {}
        }
    }
    for rp in resources.iter_mut() {
        if let Some(r) = &mut rp.resource {
            key_values(&mut r.attributes);
        }
        for sp in &mut rp.scope_profiles {
            if let Some(s) = &mut sp.scope {
                key_values(&mut s.attributes);
            }
        }
    }
    for p in profiles_mut(resources) {
        for vt in [&mut p.sample_type, &mut p.period_type]
            .into_iter()
            .flatten()
        {
            up(&mut vt.type_strindex);
            up(&mut vt.unit_strindex);
        }
    }
    let mut strings = |t: Table, i: &mut i32| {
        if t == Table::String {
            up(i);
        }
    };
    let real = |t| usize::from(!shifted.contains(&t));
    for m in skip(&mut dict.mapping_table, real(Table::Mapping)) {
        visit::mapping_mut(m, &mut strings);
    }
    for f in skip(&mut dict.function_table, real(Table::Function)) {
        visit::function_mut(f, &mut strings);
    }
    for a in skip(&mut dict.attribute_table, real(Table::Attribute)) {
        up(&mut a.key_strindex);
        up(&mut a.unit_strindex);
        if let Some(v) = &mut a.value {
            any_value(v);
        }
    }
}

/// Index 0 is the null reference, valid even into an empty table.
fn in_range(i: i32, len: usize) -> bool {
    i == 0 || (i > 0 && (i as usize) < len)
}

/// Drops string and attribute references past their table: (strings,
/// attributes) dropped.
fn drop_out_of_range(data: &mut ProfilesData) -> (u64, u64) {
    let lens = PerTable::lens(crate::proto::dictionary_of(data));
    let ProfilesData {
        resource_profiles,
        dictionary,
    } = data;
    let mut strings = 0;
    let mut string = |t: Table, i: &mut i32| {
        if t == Table::String && !in_range(*i, lens.strings) {
            *i = 0;
            strings += 1;
        }
    };
    visit::resources_mut(resource_profiles, &mut string);
    if let Some(d) = dictionary.as_mut() {
        d.mapping_table
            .iter_mut()
            .for_each(|m| visit::mapping_mut(m, &mut string));
        d.function_table
            .iter_mut()
            .for_each(|f| visit::function_mut(f, &mut string));
        d.attribute_table
            .iter_mut()
            .for_each(|a| visit::attribute_mut(a, &mut string));
    }
    let mut attributes = 0;
    let mut keep = |list: &mut Vec<i32>| {
        let before = list.len();
        list.retain(|&a| in_range(a, lens.attributes));
        attributes += (before - list.len()) as u64;
    };
    for p in profiles_mut(resource_profiles) {
        keep(&mut p.attribute_indices);
        p.samples
            .iter_mut()
            .for_each(|s| keep(&mut s.attribute_indices));
    }
    if let Some(d) = dictionary.as_mut() {
        d.mapping_table
            .iter_mut()
            .for_each(|m| keep(&mut m.attribute_indices));
        d.location_table
            .iter_mut()
            .for_each(|l| keep(&mut l.attribute_indices));
    }
    (strings, attributes)
}

fn drop_empty_samples(data: &mut ProfilesData) -> u64 {
    let mut dropped = 0;
    for p in profiles_mut(&mut data.resource_profiles) {
        let before = p.samples.len();
        p.samples
            .retain(|s| !s.values.is_empty() || !s.timestamps_unix_nano.is_empty());
        dropped += (before - p.samples.len()) as u64;
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{
        Function, KeyValueAndUnit, Line, Location, Profile, ResourceProfiles, Sample,
        ScopeProfiles, Stack, ValueType,
    };
    use crate::resolved::{resolve, Detail};
    use crate::validate;

    fn string(s: &str) -> Option<AnyValue> {
        Some(AnyValue {
            value: Some(Value::StringValue(s.into())),
        })
    }

    fn sample(stack_index: i32, attribute_indices: Vec<i32>, value: i64) -> Sample {
        Sample {
            stack_index,
            attribute_indices,
            values: vec![value],
            ..Default::default()
        }
    }

    fn data(dict: ProfilesDictionary, samples: Vec<Sample>) -> ProfilesData {
        ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                scope_profiles: vec![ScopeProfiles {
                    profiles: vec![Profile {
                        sample_type: Some(ValueType {
                            type_strindex: 1,
                            unit_strindex: 2,
                        }),
                        samples,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            dictionary: Some(dict),
        }
    }

    /// Two functions `main` and `work`, one stack `main;work`, one thread
    /// attribute: with a zero entry at 0 of every table (`zero`), or with
    /// the real entries from 0 as some producers write them.
    fn program(zero: bool) -> ProfilesDictionary {
        let z = i32::from(zero);
        let mut d = ProfilesDictionary {
            string_table: ["", "cpu", "nanoseconds", "main", "work", "thread.name"]
                .map(String::from)
                .to_vec(),
            function_table: vec![
                Function {
                    name_strindex: 3,
                    ..Default::default()
                },
                Function {
                    name_strindex: 4,
                    ..Default::default()
                },
            ],
            location_table: (0..2)
                .map(|f| Location {
                    lines: vec![Line {
                        function_index: f + z,
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .collect(),
            stack_table: vec![Stack {
                location_indices: vec![1 + z, z],
            }],
            attribute_table: vec![KeyValueAndUnit {
                key_strindex: 5,
                value: string("main-thread"),
                unit_strindex: 0,
            }],
            ..Default::default()
        };
        if zero {
            d.function_table.insert(0, Default::default());
            d.location_table.insert(0, Default::default());
            d.stack_table.insert(0, Default::default());
            d.attribute_table.insert(0, Default::default());
        }
        d
    }

    #[test]
    fn real_entries_at_index_0_keep_their_meaning() {
        let meant = data(program(true), vec![sample(1, vec![1], 7)]);
        let mut sent = data(program(false), vec![sample(0, vec![0], 7)]);
        assert!(validate(&sent).is_err());
        let r = repair(&mut sent);
        assert_eq!(
            r.shifted,
            [
                Table::Location,
                Table::Function,
                Table::Attribute,
                Table::Stack
            ]
        );
        assert_eq!(r.counts(), [("index_0_real_entry", 4)]);
        assert_eq!(validate(&sent), Ok(()));
        assert_eq!(sent, meant);
    }

    /// A resource attribute by reference, one with a plain key, a profile
    /// and an attribute naming strings: `o` is where the strings start in
    /// the string table, 1 behind the empty string, 0 without it.
    fn strings_case(o: i32) -> ProfilesData {
        let strindex = |i: i32| AnyValue {
            value: Some(Value::StringValueStrindex(i + o)),
        };
        let mut strings = vec!["cpu", "ns", "svc", "key"];
        if o == 1 {
            strings.insert(0, "");
        }
        let dict = ProfilesDictionary {
            string_table: strings.into_iter().map(String::from).collect(),
            attribute_table: vec![
                KeyValueAndUnit::default(),
                KeyValueAndUnit {
                    key_strindex: 3 + o,
                    value: Some(strindex(2)),
                    unit_strindex: 1 + o,
                },
            ],
            stack_table: vec![Stack::default()],
            ..Default::default()
        };
        let mut d = data(dict, vec![sample(0, vec![1], 7)]);
        let p = &mut d.resource_profiles[0].scope_profiles[0].profiles[0];
        p.sample_type = Some(ValueType {
            type_strindex: o,
            unit_strindex: 1 + o,
        });
        d.resource_profiles[0].resource = Some(crate::proto::Resource {
            attributes: vec![
                KeyValue {
                    key: "service.name".into(),
                    value: Some(strindex(2)),
                    key_strindex: 0,
                },
                KeyValue {
                    key: String::new(),
                    value: string("x"),
                    key_strindex: 3 + o,
                },
            ],
            ..Default::default()
        });
        d
    }

    #[test]
    fn a_real_first_string_keeps_its_meaning_and_plain_keys_stay_plain() {
        let meant = strings_case(1);
        let mut sent = strings_case(0);
        let r = repair(&mut sent);
        assert_eq!(r.shifted, [Table::String]);
        assert_eq!(validate(&sent), Ok(()));
        assert_eq!(sent, meant);
        assert_eq!(
            resolve(&sent, Detail::Full).to_text(),
            "profile sample_type=cpu/ns period_type=- period=0\n  resource: key=x, service.name=svc\n  \
             <empty stack> [key=svc (ns)] 7\n"
        );
    }

    #[test]
    fn out_of_range_references_and_empty_samples_are_dropped_and_counted() {
        let mut d = data(
            program(true),
            vec![
                sample(1, vec![1, 9], 7),
                Sample {
                    stack_index: 1,
                    ..Default::default()
                },
                sample(1, vec![-3, 1], 5),
            ],
        );
        let dict = d.dictionary.as_mut().unwrap();
        dict.function_table[2].filename_strindex = 40;
        dict.location_table[1].attribute_indices = vec![2];
        let p = &mut d.resource_profiles[0].scope_profiles[0].profiles[0];
        p.period_type = Some(ValueType {
            type_strindex: -1,
            unit_strindex: 2,
        });
        let r = repair(&mut d);
        assert_eq!(
            r.counts(),
            [
                ("string_index_out_of_range", 2),
                ("attribute_index_out_of_range", 3),
                ("empty_sample", 1)
            ]
        );
        assert_eq!(validate(&d), Ok(()));
        let p = &d.resource_profiles[0].scope_profiles[0].profiles[0];
        assert_eq!(
            p.samples,
            [sample(1, vec![1], 7), sample(1, vec![1], 5)],
            "what was meant is left"
        );
        assert_eq!(p.period_type.unwrap().type_strindex, 0);
        assert_eq!(repair(&mut d), Repairs::default(), "nothing left to repair");
    }
}
