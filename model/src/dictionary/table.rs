use std::fmt;

/// The seven tables of a `ProfilesDictionary`; names every index field's target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    String,
    Mapping,
    Location,
    Function,
    Link,
    Attribute,
    Stack,
}

impl Table {
    pub const ALL: [Table; 7] = [
        Table::String,
        Table::Mapping,
        Table::Location,
        Table::Function,
        Table::Link,
        Table::Attribute,
        Table::Stack,
    ];

    /// The proto field name of the table (`stack_table`).
    pub fn field_name(self) -> &'static str {
        match self {
            Table::String => "string_table",
            Table::Mapping => "mapping_table",
            Table::Location => "location_table",
            Table::Function => "function_table",
            Table::Link => "link_table",
            Table::Attribute => "attribute_table",
            Table::Stack => "stack_table",
        }
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.field_name())
    }
}

/// One number per table (entry counts, removed entries, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerTable {
    pub strings: usize,
    pub mappings: usize,
    pub locations: usize,
    pub functions: usize,
    pub links: usize,
    pub attributes: usize,
    pub stacks: usize,
}

impl PerTable {
    /// Entry counts of `dict`.
    pub fn lens(dict: &crate::proto::ProfilesDictionary) -> Self {
        Self {
            strings: dict.string_table.len(),
            mappings: dict.mapping_table.len(),
            locations: dict.location_table.len(),
            functions: dict.function_table.len(),
            links: dict.link_table.len(),
            attributes: dict.attribute_table.len(),
            stacks: dict.stack_table.len(),
        }
    }

    pub fn get(&self, t: Table) -> usize {
        match t {
            Table::String => self.strings,
            Table::Mapping => self.mappings,
            Table::Location => self.locations,
            Table::Function => self.functions,
            Table::Link => self.links,
            Table::Attribute => self.attributes,
            Table::Stack => self.stacks,
        }
    }

    pub fn total(&self) -> usize {
        Table::ALL.iter().map(|&t| self.get(t)).sum()
    }

    /// `self - other`, table by table (saturating).
    pub fn minus(&self, other: &Self) -> Self {
        Self {
            strings: self.strings.saturating_sub(other.strings),
            mappings: self.mappings.saturating_sub(other.mappings),
            locations: self.locations.saturating_sub(other.locations),
            functions: self.functions.saturating_sub(other.functions),
            links: self.links.saturating_sub(other.links),
            attributes: self.attributes.saturating_sub(other.attributes),
            stacks: self.stacks.saturating_sub(other.stacks),
        }
    }
}
