use crate::proto::{
    AnyValue, Function, KeyValueAndUnit, Link, Location, Mapping, ProfilesDictionary, Stack,
};

use super::interner::Interner;

/// Builds a `ProfilesDictionary` by value: every `intern_*` returns the index
/// of an equal entry if there is one, so the result holds no duplicates.
///
/// Callers intern bottom up (strings, then functions and mappings, then
/// locations, stacks), passing the indices they got back.
#[derive(Clone, Default)]
pub struct DictionaryBuilder {
    pub strings: Interner<String>,
    pub mappings: Interner<Mapping>,
    pub functions: Interner<Function>,
    pub locations: Interner<Location>,
    pub stacks: Interner<Stack>,
    pub attributes: Interner<KeyValueAndUnit>,
    pub links: Interner<Link>,
}

impl DictionaryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn string(&mut self, s: &str) -> i32 {
        self.strings.intern_by(s, |a, b| a == b, |s| s.to_owned())
    }

    pub fn mapping(&mut self, m: Mapping) -> i32 {
        self.mappings.intern(m)
    }

    pub fn function(&mut self, f: Function) -> i32 {
        self.functions.intern(f)
    }

    /// Interns a function from its strings.
    pub fn function_named(&mut self, name: &str, system_name: &str, filename: &str, start_line: i64) -> i32 {
        let f = Function {
            name_strindex: self.string(name),
            system_name_strindex: self.string(system_name),
            filename_strindex: self.string(filename),
            start_line,
        };
        self.function(f)
    }

    pub fn location(&mut self, l: Location) -> i32 {
        self.locations.intern(l)
    }

    /// Interns a stack by its location indices (leaf first), allocating only
    /// when the stack is new.
    pub fn stack(&mut self, location_indices: &[i32]) -> i32 {
        self.stacks.intern_by(
            location_indices,
            |a, b| a.location_indices.as_slice() == b,
            |b| Stack {
                location_indices: b.to_vec(),
            },
        )
    }

    pub fn attribute(&mut self, a: KeyValueAndUnit) -> i32 {
        self.attributes.intern(a)
    }

    /// Interns an attribute from its key, value and unit (`""` for none).
    pub fn attribute_kv(&mut self, key: &str, value: AnyValue, unit: &str) -> i32 {
        let a = KeyValueAndUnit {
            key_strindex: self.string(key),
            value: Some(value),
            unit_strindex: self.string(unit),
        };
        self.attribute(a)
    }

    pub fn link(&mut self, l: Link) -> i32 {
        self.links.intern(l)
    }

    pub fn finish(self) -> ProfilesDictionary {
        ProfilesDictionary {
            mapping_table: self.mappings.into_values(),
            location_table: self.locations.into_values(),
            function_table: self.functions.into_values(),
            link_table: self.links.into_values(),
            string_table: self.strings.into_values(),
            attribute_table: self.attributes.into_values(),
            stack_table: self.stacks.into_values(),
        }
    }
}
