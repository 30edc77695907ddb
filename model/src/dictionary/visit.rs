//! Every index field of a `ProfilesData`, visited in one place so that
//! marking, remapping and the tests agree on what refers to what.
//!
//! Each visitor exists twice (shared and `_mut`), generated from one body.

use crate::proto::{
    any_value::Value, AnyValue, Function, KeyValue, KeyValueAndUnit, Location, Mapping, Profile,
    ResourceProfiles, Stack,
};

use super::Table;
use profcol_prefetch::{ahead, prefetch_slice};

macro_rules! visitors {
    ($resources:ident, $resources_with:ident, $profile:ident, $key_values:ident,
     $any_value:ident, $mapping:ident, $location:ident, $function:ident, $attribute:ident,
     $stack:ident; $($m:ident)?) => {
        /// Index fields outside the dictionary: resource and scope attributes,
        /// profiles (sample and period types, attributes) and samples.
        pub fn $resources<F: FnMut(Table, &$($m)? i32)>(resources: &$($m)? [ResourceProfiles], f: &mut F) {
            $resources_with(resources, f, &mut || true);
        }

        /// [`resources`], visiting a profile's samples only when
        /// `samples()`, called once per profile in order, says so.
        pub fn $resources_with<F: FnMut(Table, &$($m)? i32), S: FnMut() -> bool>(
            resources: &$($m)? [ResourceProfiles],
            f: &mut F,
            samples: &mut S,
        ) {
            for rp in resources {
                if let Some(r) = &$($m)? rp.resource {
                    $key_values(&$($m)? r.attributes, f);
                }
                for sp in &$($m)? rp.scope_profiles {
                    if let Some(s) = &$($m)? sp.scope {
                        $key_values(&$($m)? s.attributes, f);
                    }
                    for p in &$($m)? sp.profiles {
                        $profile(p, f, samples());
                    }
                }
            }
        }

        /// A profile's index fields: sample and period types, attributes,
        /// and its samples' when `samples`.
        pub fn $profile<F: FnMut(Table, &$($m)? i32)>(p: &$($m)? Profile, f: &mut F, samples: bool) {
            if let Some(vt) = &$($m)? p.sample_type {
                f(Table::String, &$($m)? vt.type_strindex);
                f(Table::String, &$($m)? vt.unit_strindex);
            }
            if let Some(vt) = &$($m)? p.period_type {
                f(Table::String, &$($m)? vt.type_strindex);
                f(Table::String, &$($m)? vt.unit_strindex);
            }
            for a in &$($m)? p.attribute_indices {
                f(Table::Attribute, a);
            }
            if !samples {
                return;
            }
            let samples = &$($m)? p.samples;
            for k in 0..samples.len() {
                if let Some(next) = ahead(samples, k) {
                    prefetch_slice(&next.attribute_indices);
                }
                let s = &$($m)? samples[k];
                f(Table::Stack, &$($m)? s.stack_index);
                for a in &$($m)? s.attribute_indices {
                    f(Table::Attribute, a);
                }
                f(Table::Link, &$($m)? s.link_index);
            }
        }

        /// `KeyValue.key_strindex` and string references in the values.
        pub fn $key_values<F: FnMut(Table, &$($m)? i32)>(kvs: &$($m)? [KeyValue], f: &mut F) {
            for kv in kvs {
                f(Table::String, &$($m)? kv.key_strindex);
                if let Some(v) = &$($m)? kv.value {
                    $any_value(v, f);
                }
            }
        }

        /// `string_value_strindex`, recursively through arrays and kvlists.
        pub fn $any_value<F: FnMut(Table, &$($m)? i32)>(v: &$($m)? AnyValue, f: &mut F) {
            match &$($m)? v.value {
                Some(Value::StringValueStrindex(i)) => f(Table::String, i),
                Some(Value::ArrayValue(a)) => {
                    for x in &$($m)? a.values {
                        $any_value(x, f);
                    }
                }
                Some(Value::KvlistValue(kv)) => $key_values(&$($m)? kv.values, f),
                _ => {}
            }
        }

        pub fn $mapping<F: FnMut(Table, &$($m)? i32)>(m: &$($m)? Mapping, f: &mut F) {
            f(Table::String, &$($m)? m.filename_strindex);
            for a in &$($m)? m.attribute_indices {
                f(Table::Attribute, a);
            }
        }

        pub fn $location<F: FnMut(Table, &$($m)? i32)>(l: &$($m)? Location, f: &mut F) {
            f(Table::Mapping, &$($m)? l.mapping_index);
            for line in &$($m)? l.lines {
                f(Table::Function, &$($m)? line.function_index);
            }
            for a in &$($m)? l.attribute_indices {
                f(Table::Attribute, a);
            }
        }

        pub fn $function<F: FnMut(Table, &$($m)? i32)>(x: &$($m)? Function, f: &mut F) {
            f(Table::String, &$($m)? x.name_strindex);
            f(Table::String, &$($m)? x.system_name_strindex);
            f(Table::String, &$($m)? x.filename_strindex);
        }

        pub fn $attribute<F: FnMut(Table, &$($m)? i32)>(a: &$($m)? KeyValueAndUnit, f: &mut F) {
            f(Table::String, &$($m)? a.key_strindex);
            f(Table::String, &$($m)? a.unit_strindex);
            if let Some(v) = &$($m)? a.value {
                $any_value(v, f);
            }
        }

        pub fn $stack<F: FnMut(Table, &$($m)? i32)>(s: &$($m)? Stack, f: &mut F) {
            for l in &$($m)? s.location_indices {
                f(Table::Location, l);
            }
        }
    };
}

visitors!(resources, resources_with, profile, key_values, any_value, mapping, location,
    function, attribute, stack;);
visitors!(resources_mut, resources_mut_with, profile_mut, key_values_mut, any_value_mut,
    mapping_mut, location_mut, function_mut, attribute_mut, stack_mut; mut);
