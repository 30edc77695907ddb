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

    /// An empty builder sized for a dictionary like `dict`.
    pub fn with_capacity_for(dict: &ProfilesDictionary) -> Self {
        Self {
            strings: Interner::with_capacity(dict.string_table.len()),
            mappings: Interner::with_capacity(dict.mapping_table.len()),
            functions: Interner::with_capacity(dict.function_table.len()),
            locations: Interner::with_capacity(dict.location_table.len()),
            stacks: Interner::with_capacity(dict.stack_table.len()),
            attributes: Interner::with_capacity(dict.attribute_table.len()),
            links: Interner::with_capacity(dict.link_table.len()),
        }
    }

    /// Continues an existing dictionary: its entries keep their indices, so
    /// data referring to it stays valid, and new entries are appended
    /// (deduplicated against it). Empty tables get their zero value.
    pub fn from_dictionary(dict: ProfilesDictionary) -> Self {
        Self {
            strings: Interner::from_values(dict.string_table),
            mappings: Interner::from_values(dict.mapping_table),
            functions: Interner::from_values(dict.function_table),
            locations: Interner::from_values(dict.location_table),
            stacks: Interner::from_values(dict.stack_table),
            attributes: Interner::from_values(dict.attribute_table),
            links: Interner::from_values(dict.link_table),
        }
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
    pub fn function_named(
        &mut self,
        name: &str,
        system_name: &str,
        filename: &str,
        start_line: i64,
    ) -> i32 {
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
