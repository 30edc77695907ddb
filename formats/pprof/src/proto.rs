//! `perftools.profiles` messages, written by hand from google/pprof
//! `proto/profile.proto` (upstream main, the version with `Line.column`):
//! field names, types and tags match it exactly, so no protoc is needed.
//!
//! These structs are used to read pprof files and in tests; the OTLP -> pprof
//! direction streams the same wire format without building them (see
//! `encode.rs`), so the tags are also spelled out in [`tags`].

/// A profile: samples, the tables they reference and informational fields.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// Type and unit of each `Sample.value`.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// `mapping[0]` is the main binary, by convention.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// `string_table[0]` must be `""`.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Regexp of function names to drop, with their callees (string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Regexp of function names to keep even if they match `drop_frames`.
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form text lines (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// String index of the preferred sample type; unset means the last one.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
    /// Documentation link for this profile (string index).
    #[prost(int64, tag = "15")]
    pub doc_url: i64,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per `Profile.sample_type`.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A sample label: `str` or `num` (with an optional `num_unit`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// Unique nonzero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Unique nonzero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// 0 when the mapping is unknown.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Inlined functions first; the last line is the caller.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
    #[prost(int64, tag = "3")]
    pub column: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// Unique nonzero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

/// Field numbers of the messages above, for the streaming writer.
pub mod tags {
    pub mod profile {
        pub const SAMPLE_TYPE: u32 = 1;
        pub const SAMPLE: u32 = 2;
        pub const MAPPING: u32 = 3;
        pub const LOCATION: u32 = 4;
        pub const FUNCTION: u32 = 5;
        pub const STRING_TABLE: u32 = 6;
        pub const DROP_FRAMES: u32 = 7;
        pub const KEEP_FRAMES: u32 = 8;
        pub const TIME_NANOS: u32 = 9;
        pub const DURATION_NANOS: u32 = 10;
        pub const PERIOD_TYPE: u32 = 11;
        pub const PERIOD: u32 = 12;
        pub const COMMENT: u32 = 13;
        pub const DEFAULT_SAMPLE_TYPE: u32 = 14;
        pub const DOC_URL: u32 = 15;
    }
    pub mod sample {
        pub const LOCATION_ID: u32 = 1;
        pub const VALUE: u32 = 2;
        pub const LABEL: u32 = 3;
    }
    pub mod label {
        pub const KEY: u32 = 1;
        pub const STR: u32 = 2;
        pub const NUM: u32 = 3;
        pub const NUM_UNIT: u32 = 4;
    }
    pub mod location {
        pub const ID: u32 = 1;
        pub const MAPPING_ID: u32 = 2;
        pub const ADDRESS: u32 = 3;
        pub const LINE: u32 = 4;
        pub const IS_FOLDED: u32 = 5;
    }
    pub mod line {
        pub const FUNCTION_ID: u32 = 1;
        pub const LINE: u32 = 2;
        pub const COLUMN: u32 = 3;
    }
    pub mod function {
        pub const ID: u32 = 1;
        pub const NAME: u32 = 2;
        pub const SYSTEM_NAME: u32 = 3;
        pub const FILENAME: u32 = 4;
        pub const START_LINE: u32 = 5;
    }
}
