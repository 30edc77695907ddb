use crate::proto::{
    any_value::Value, AnyValue, Function, KeyValue, KeyValueAndUnit, Link, Location, Mapping,
    ProfilesData, ProfilesDictionary, Stack,
};

static ZERO_MAPPING: Mapping = Mapping {
    memory_start: 0,
    memory_limit: 0,
    file_offset: 0,
    filename_strindex: 0,
    attribute_indices: Vec::new(),
};
static ZERO_LOCATION: Location = Location {
    mapping_index: 0,
    address: 0,
    lines: Vec::new(),
    attribute_indices: Vec::new(),
};
static ZERO_FUNCTION: Function = Function {
    name_strindex: 0,
    system_name_strindex: 0,
    filename_strindex: 0,
    start_line: 0,
};
static ZERO_LINK: Link = Link {
    trace_id: Vec::new(),
    span_id: Vec::new(),
};
static ZERO_ATTRIBUTE: KeyValueAndUnit = KeyValueAndUnit {
    key_strindex: 0,
    value: None,
    unit_strindex: 0,
};
static ZERO_STACK: Stack = Stack {
    location_indices: Vec::new(),
};

/// Read access to a dictionary by index that never panics: index 0 of an
/// empty table (and, on unvalidated data, any index out of range) reads as
/// the table's zero value, which is what the proto's null index means.
#[derive(Clone, Copy)]
pub struct Lookup<'a> {
    dict: &'a ProfilesDictionary,
}

impl<'a> Lookup<'a> {
    pub fn new(dict: &'a ProfilesDictionary) -> Self {
        Self { dict }
    }

    /// The dictionary of `data`, or an empty one.
    pub fn of(data: &'a ProfilesData) -> Self {
        Self::new(crate::proto::dictionary_of(data))
    }

    pub fn dictionary(&self) -> &'a ProfilesDictionary {
        self.dict
    }

    pub fn string(&self, i: i32) -> &'a str {
        at(&self.dict.string_table, i).map_or("", String::as_str)
    }

    pub fn mapping(&self, i: i32) -> &'a Mapping {
        at(&self.dict.mapping_table, i).unwrap_or(&ZERO_MAPPING)
    }

    pub fn location(&self, i: i32) -> &'a Location {
        at(&self.dict.location_table, i).unwrap_or(&ZERO_LOCATION)
    }

    pub fn function(&self, i: i32) -> &'a Function {
        at(&self.dict.function_table, i).unwrap_or(&ZERO_FUNCTION)
    }

    pub fn link(&self, i: i32) -> &'a Link {
        at(&self.dict.link_table, i).unwrap_or(&ZERO_LINK)
    }

    pub fn attribute(&self, i: i32) -> &'a KeyValueAndUnit {
        at(&self.dict.attribute_table, i).unwrap_or(&ZERO_ATTRIBUTE)
    }

    pub fn stack(&self, i: i32) -> &'a Stack {
        at(&self.dict.stack_table, i).unwrap_or(&ZERO_STACK)
    }

    /// Key of a `KeyValue`: `key`, else the string at `key_strindex`.
    pub fn key_of(&self, kv: &'a KeyValue) -> &'a str {
        if kv.key.is_empty() {
            self.string(kv.key_strindex)
        } else {
            &kv.key
        }
    }

    /// The string of a string value, plain or by reference.
    pub fn str_value(&self, v: &'a AnyValue) -> Option<&'a str> {
        match &v.value {
            Some(Value::StringValue(s)) => Some(s),
            Some(Value::StringValueStrindex(i)) => Some(self.string(*i)),
            _ => None,
        }
    }

    /// Value of the first attribute named `key` among `indices` (sample,
    /// location, mapping or profile `attribute_indices`).
    pub fn attribute_value(&self, indices: &[i32], key: &str) -> Option<&'a AnyValue> {
        indices.iter().find_map(|&i| {
            let a = self.attribute(i);
            (self.string(a.key_strindex) == key)
                .then_some(a.value.as_ref())
                .flatten()
        })
    }

    /// Like [`Self::attribute_value`], for string values.
    pub fn attribute_str(&self, indices: &[i32], key: &str) -> Option<&'a str> {
        self.attribute_value(indices, key)
            .and_then(|v| self.str_value(v))
    }
}

#[inline]
fn at<T>(table: &[T], i: i32) -> Option<&T> {
    usize::try_from(i).ok().and_then(|i| table.get(i))
}
