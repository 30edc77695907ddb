//! OTLP -> pprof, streamed.
//!
//! Samples are written to the output as they are converted; only the tables
//! (locations, functions, mappings, strings) are kept until the end, and
//! protobuf allows a message's fields in any order, so they follow the
//! samples. Every stack, attribute and link is encoded once and its bytes
//! reused by each sample that references it: a sample costs a few copies and
//! no allocation.

use std::borrow::Cow;
use std::io::Write;
use std::ops::Range;

use prost::encoding::{encoded_len_varint, WireType};
use prost::Message;

use super::gzip::GzipWriter;
use super::plan::{kv_key, label_attributes, string};
use super::proto::{self, tags};
use super::strings::StringTable;
use super::{keys, plan_files, PprofError, PprofFile, ProfileRef, ToPprofOptions};
use profcol_model::dictionary::Lookup;
use profcol_model::proto::{
    any_value::Value, AnyValue, KeyValueAndUnit, Profile, ProfilesData, ProfilesDictionary,
    ResourceProfiles, Sample,
};

/// Output is handed to the writer in chunks of about this size.
const FLUSH_AT: usize = 64 * 1024;
const UNSET: usize = usize::MAX;
const NO_STACK: (u32, u32) = (u32::MAX, 0);
const WANTED: (u32, u32) = (u32::MAX, 1);

/// Labels one attribute (or link, or resource attribute) becomes: a run of
/// encoded `Sample.label` fields in `Encoder::labels`, all with one key.
#[derive(Clone)]
struct Labels {
    bytes: Range<usize>,
    key: i64,
}

const NOT_YET: Labels = Labels {
    bytes: UNSET..UNSET,
    key: 0,
};

struct Encoder<'a, W: Write> {
    dict: &'a ProfilesDictionary,
    /// Reads table entries at positions already checked against the
    /// per-table vectors below: index 0 of an empty table reads as the
    /// table's zero value.
    lookup: Lookup<'a>,
    strings: StringTable<'a>,
    /// OTLP index -> pprof id (0: not referenced yet), and the referenced
    /// OTLP indices in id order. Per-index vectors have at least one entry
    /// (see [`slots`]).
    location_ids: Vec<u32>,
    locations: Vec<usize>,
    function_ids: Vec<u32>,
    functions: Vec<usize>,
    mapping_ids: Vec<u32>,
    mappings: Vec<usize>,
    /// Packed pprof location ids of each stack the file uses, as
    /// (start, len) in `stack_bytes`; see [`Encoder::prepare_stacks`].
    stacks: Vec<(u32, u32)>,
    stack_bytes: Vec<u8>,
    attributes: Vec<Labels>,
    links: Vec<Labels>,
    labels: Vec<u8>,
    buf: Vec<u8>,
    out: W,
}

fn invalid(msg: String) -> PprofError {
    PprofError::InvalidOtlp(msg)
}

fn key_len(tag: u32) -> usize {
    prost::encoding::key_len(tag)
}

/// Length of a varint field, 0 when proto3 omits it (value 0).
fn varint_field_len(tag: u32, v: u64) -> usize {
    if v == 0 {
        0
    } else {
        key_len(tag) + encoded_len_varint(v)
    }
}

/// Appends `v` as a protobuf varint; the hot path, so written for `Vec`.
#[inline]
fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
fn put_varint_field(buf: &mut Vec<u8>, tag: u32, v: u64) {
    if v != 0 {
        // Every tag written here is below 16: a one-byte key.
        debug_assert!(tag < 16);
        buf.push((tag << 3) as u8 | WireType::Varint as u8);
        put_varint(buf, v);
    }
}

#[inline]
fn put_len_prefix(buf: &mut Vec<u8>, tag: u32, len: usize) {
    // Every tag written here is below 16: a one-byte key.
    debug_assert!(tag < 16);
    buf.push((tag << 3) as u8 | WireType::LengthDelimited as u8);
    put_varint(buf, len as u64);
}

fn len_field_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

fn line_len(l: &proto::Line) -> usize {
    use tags::line::*;
    varint_field_len(FUNCTION_ID, l.function_id)
        + varint_field_len(LINE, l.line as u64)
        + varint_field_len(COLUMN, l.column as u64)
}

/// Appends `l` as a `Profile.location` field, byte for byte what prost
/// writes, without prost's separate length pass: locations are much of a
/// small file's tables.
fn put_location(buf: &mut Vec<u8>, l: &proto::Location) {
    use tags::location::*;
    let mut len = varint_field_len(ID, l.id)
        + varint_field_len(MAPPING_ID, l.mapping_id)
        + varint_field_len(ADDRESS, l.address)
        + varint_field_len(IS_FOLDED, u64::from(l.is_folded));
    for line in &l.line {
        len += len_field_len(LINE, line_len(line));
    }
    put_len_prefix(buf, tags::profile::LOCATION, len);
    put_varint_field(buf, ID, l.id);
    put_varint_field(buf, MAPPING_ID, l.mapping_id);
    put_varint_field(buf, ADDRESS, l.address);
    for line in &l.line {
        put_len_prefix(buf, LINE, line_len(line));
        put_varint_field(buf, tags::line::FUNCTION_ID, line.function_id);
        put_varint_field(buf, tags::line::LINE, line.line as u64);
        put_varint_field(buf, tags::line::COLUMN, line.column as u64);
    }
    put_varint_field(buf, IS_FOLDED, u64::from(l.is_folded));
}

/// Appends `f` as a `Profile.function` field, as [`put_location`] does.
fn put_function(buf: &mut Vec<u8>, f: &proto::Function) {
    use tags::function::*;
    let len = varint_field_len(ID, f.id)
        + varint_field_len(NAME, f.name as u64)
        + varint_field_len(SYSTEM_NAME, f.system_name as u64)
        + varint_field_len(FILENAME, f.filename as u64)
        + varint_field_len(START_LINE, f.start_line as u64);
    put_len_prefix(buf, tags::profile::FUNCTION, len);
    put_varint_field(buf, ID, f.id);
    put_varint_field(buf, NAME, f.name as u64);
    put_varint_field(buf, SYSTEM_NAME, f.system_name as u64);
    put_varint_field(buf, FILENAME, f.filename as u64);
    put_varint_field(buf, START_LINE, f.start_line as u64);
}

/// A sample's value for its sample type: the sum of its values, or the
/// number of timestamps when it has only those (each counts 1, per the
/// OTLP `Sample` docs).
fn sample_value(s: &Sample) -> i64 {
    if s.values.is_empty() {
        s.timestamps_unix_nano.len() as i64
    } else {
        s.values.iter().fold(0i64, |a, &v| a.wrapping_add(v))
    }
}

/// A string form for values pprof has no label type for.
fn render(v: &AnyValue, dict: &ProfilesDictionary) -> String {
    match &v.value {
        None => String::new(),
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::StringValueStrindex(i)) => dict
            .string_table
            .get(*i as usize)
            .cloned()
            .unwrap_or_default(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(n)) => n.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BytesValue(b)) => hex::encode(b),
        Some(Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(|v| render(v, dict)).collect();
            format!("[{}]", items.join(","))
        }
        Some(Value::KvlistValue(kv)) => {
            let items: Vec<String> = kv
                .values
                .iter()
                .map(|kv| {
                    format!(
                        "{}={}",
                        kv_key(dict, kv),
                        kv.value
                            .as_ref()
                            .map(|v| render(v, dict))
                            .unwrap_or_default()
                    )
                })
                .collect();
            format!("{{{}}}", items.join(","))
        }
    }
}

/// A pprof id for a 0-based table position.
fn id_of(pos: usize) -> u64 {
    pos as u64 + 1
}

/// Number of valid indices into an OTLP table of `len` entries: index 0 is
/// the proto's null reference and valid even into an empty table, where it
/// reads as the zero value (as `model::validate` accepts and
/// [`Lookup`] reads it).
fn slots(len: usize) -> usize {
    len.max(1)
}

/// `idx` as a position below `len` ([`slots`] of its table), else an error
/// naming `what`.
fn slot(idx: i32, len: usize, what: &str) -> Result<usize, PprofError> {
    usize::try_from(idx)
        .ok()
        .filter(|&i| i < len)
        .ok_or_else(|| invalid(format!("{what} index {idx} out of range")))
}

impl<'a, W: Write> Encoder<'a, W> {
    fn new(dict: &'a ProfilesDictionary, out: W) -> Self {
        Self {
            dict,
            lookup: Lookup::new(dict),
            strings: StringTable::new(dict.string_table.len()),
            location_ids: vec![0; slots(dict.location_table.len())],
            locations: Vec::new(),
            function_ids: vec![0; slots(dict.function_table.len())],
            functions: Vec::new(),
            // Mapping index 0 is "no mapping" and never gets an id.
            mapping_ids: vec![0; dict.mapping_table.len()],
            mappings: Vec::new(),
            stacks: vec![NO_STACK; slots(dict.stack_table.len())],
            stack_bytes: Vec::new(),
            attributes: vec![NOT_YET; slots(dict.attribute_table.len())],
            links: vec![NOT_YET; slots(dict.link_table.len())],
            labels: Vec::new(),
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            out,
        }
    }

    fn flush_if_full(&mut self) -> Result<(), PprofError> {
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn string(&mut self, idx: i32, what: &str) -> Result<i64, PprofError> {
        self.strings
            .dict(&self.dict.string_table, idx)
            .ok_or_else(|| invalid(format!("{what}: string index {idx} out of range")))
    }

    /// pprof id of OTLP function `idx`. Index 0 (the empty function, also
    /// when the table is empty) gets an id and an empty `Function` like any
    /// other: a line with `function_id: 0` makes Go's pprof refuse the file
    /// ("location id: N has a line with nil function").
    fn function_id(&mut self, idx: i32) -> Result<u32, PprofError> {
        let slot = slot(idx, self.function_ids.len(), "function")?;
        if self.function_ids[slot] == 0 {
            self.functions.push(slot);
            self.function_ids[slot] = self.functions.len() as u32;
        }
        Ok(self.function_ids[slot])
    }

    fn mapping_id(&mut self, idx: i32) -> Result<u32, PprofError> {
        if idx == 0 {
            return Ok(0);
        }
        let slot = usize::try_from(idx)
            .ok()
            .filter(|&i| i < self.mapping_ids.len())
            .ok_or_else(|| invalid(format!("mapping index {idx} out of range")))?;
        if self.mapping_ids[slot] == 0 {
            self.mappings.push(slot);
            self.mapping_ids[slot] = self.mappings.len() as u32;
        }
        Ok(self.mapping_ids[slot])
    }

    fn location_id(&mut self, idx: i32) -> Result<u32, PprofError> {
        let slot = slot(idx, self.location_ids.len(), "location")?;
        if self.location_ids[slot] == 0 {
            let loc = self.lookup.location(idx);
            self.mapping_id(loc.mapping_index)?;
            for line in &loc.lines {
                self.function_id(line.function_index)?;
            }
            self.locations.push(slot);
            self.location_ids[slot] = self.locations.len() as u32;
        }
        Ok(self.location_ids[slot])
    }

    /// Encodes the location ids of every stack the samples use, walking
    /// the stack table in order: samples visit stacks at random, and doing
    /// the first visit here keeps the dictionary reads sequential.
    fn prepare_stacks<'s>(
        &mut self,
        samples: impl Iterator<Item = &'s Sample>,
    ) -> Result<(), PprofError> {
        for s in samples {
            let slot = slot(s.stack_index, self.stacks.len(), "stack")?;
            self.stacks[slot] = WANTED;
        }
        for slot in 0..self.stacks.len() {
            if self.stacks[slot] != WANTED {
                continue;
            }
            let stack = self.lookup.stack(slot as i32);
            let start = self.stack_bytes.len();
            for &li in &stack.location_indices {
                let id = self.location_id(li)?;
                put_varint(&mut self.stack_bytes, u64::from(id));
            }
            let too_large = || invalid("stacks too large for one pprof file".into());
            let start = u32::try_from(start).map_err(|_| too_large())?;
            let end = u32::try_from(self.stack_bytes.len()).map_err(|_| too_large())?;
            self.stacks[slot] = (start, end - start);
        }
        Ok(())
    }

    /// Packed location ids of a stack [`Self::prepare_stacks`] saw.
    #[inline]
    fn stack(&self, idx: i32) -> Range<usize> {
        let (start, len) = self.stacks[idx as usize];
        start as usize..(start + len) as usize
    }

    fn push_label(&mut self, key: i64, str: i64, num: i64, num_unit: i64) {
        let len = varint_field_len(tags::label::KEY, key as u64)
            + varint_field_len(tags::label::STR, str as u64)
            + varint_field_len(tags::label::NUM, num as u64)
            + varint_field_len(tags::label::NUM_UNIT, num_unit as u64);
        let b = &mut self.labels;
        put_len_prefix(b, tags::sample::LABEL, len);
        put_varint_field(b, tags::label::KEY, key as u64);
        put_varint_field(b, tags::label::STR, str as u64);
        put_varint_field(b, tags::label::NUM, num as u64);
        put_varint_field(b, tags::label::NUM_UNIT, num_unit as u64);
    }

    /// Appends the labels `value` becomes: strings as `str`, integers as
    /// `num` with `unit`, arrays as one label per element, anything else as
    /// its string form.
    fn push_value(&mut self, key: i64, value: &'a AnyValue, unit: i64) -> Result<(), PprofError> {
        match &value.value {
            None => {}
            Some(Value::StringValue(s)) => {
                let s = self.strings.borrowed(s);
                self.push_label(key, s, 0, 0);
            }
            Some(Value::StringValueStrindex(i)) => {
                let s = self.string(*i, "attribute value")?;
                self.push_label(key, s, 0, 0);
            }
            Some(Value::IntValue(n)) => self.push_label(key, 0, *n, unit),
            Some(Value::BoolValue(b)) => {
                let s = self.strings.borrowed(if *b { "true" } else { "false" });
                self.push_label(key, s, 0, 0);
            }
            Some(Value::ArrayValue(a)) => {
                for v in &a.values {
                    self.push_value(key, v, unit)?;
                }
            }
            Some(_) => {
                let s = self.strings.intern(Cow::Owned(render(value, self.dict)));
                self.push_label(key, s, 0, 0);
            }
        }
        Ok(())
    }

    fn attribute(&mut self, idx: i32) -> Result<Labels, PprofError> {
        let slot = slot(idx, self.attributes.len(), "attribute")?;
        if self.attributes[slot].bytes.start == UNSET {
            let a = self.lookup.attribute(idx);
            let key = self.string(a.key_strindex, "attribute key")?;
            let unit = self.string(a.unit_strindex, "attribute unit")?;
            let start = self.labels.len();
            if key != 0 {
                if let Some(v) = &a.value {
                    self.push_value(key, v, unit)?;
                }
            }
            self.attributes[slot] = Labels {
                bytes: start..self.labels.len(),
                key,
            };
        }
        Ok(self.attributes[slot].clone())
    }

    /// `trace_id` / `span_id` labels (lowercase hex) of link `idx`.
    fn link(&mut self, idx: i32) -> Result<Range<usize>, PprofError> {
        let slot = slot(idx, self.links.len(), "link")?;
        if self.links[slot].bytes.start == UNSET {
            let link = self.lookup.link(idx);
            let start = self.labels.len();
            for (key, id) in [
                (keys::TRACE_ID_LABEL, &link.trace_id),
                (keys::SPAN_ID_LABEL, &link.span_id),
            ] {
                if id.iter().any(|&b| b != 0) {
                    let k = self.strings.borrowed(key);
                    let v = self.strings.intern(Cow::Owned(hex::encode(id)));
                    self.push_label(k, v, 0, 0);
                }
            }
            self.links[slot] = Labels {
                bytes: start..self.labels.len(),
                key: 0,
            };
        }
        Ok(self.links[slot].bytes.clone())
    }

    /// Writes one `Sample`. `extra` are profile and resource labels, each
    /// skipped when a label closer to the sample has the same key.
    fn sample(&mut self, s: &Sample, values: &[i64], extra: &[Labels]) -> Result<(), PprofError> {
        let stack = self.stack(s.stack_index);
        let link = self.link(s.link_index)?;
        let mut labels_len = link.len();
        for &ai in &s.attribute_indices {
            labels_len += self.attribute(ai)?.bytes.len();
        }
        let shadowed = |this: &Self, at: usize| {
            let key = extra[at].key;
            s.attribute_indices
                .iter()
                .any(|&ai| this.attributes[ai as usize].key == key)
                || extra[..at].iter().any(|l| l.key == key)
        };
        for (i, l) in extra.iter().enumerate() {
            if !shadowed(self, i) {
                labels_len += l.bytes.len();
            }
        }
        let values_len: usize = values.iter().map(|&v| encoded_len_varint(v as u64)).sum();
        let mut len = labels_len;
        if !stack.is_empty() {
            len += len_field_len(tags::sample::LOCATION_ID, stack.len());
        }
        if values_len > 0 {
            len += len_field_len(tags::sample::VALUE, values_len);
        }

        put_len_prefix(&mut self.buf, tags::profile::SAMPLE, len);
        if !stack.is_empty() {
            put_len_prefix(&mut self.buf, tags::sample::LOCATION_ID, stack.len());
            self.buf.extend_from_slice(&self.stack_bytes[stack]);
        }
        if values_len > 0 {
            put_len_prefix(&mut self.buf, tags::sample::VALUE, values_len);
            for &v in values {
                put_varint(&mut self.buf, v as u64);
            }
        }
        for &ai in &s.attribute_indices {
            let r = self.attributes[ai as usize].bytes.clone();
            self.buf.extend_from_slice(&self.labels[r]);
        }
        self.buf.extend_from_slice(&self.labels[link]);
        for (i, l) in extra.iter().enumerate() {
            if !shadowed(self, i) {
                self.buf.extend_from_slice(&self.labels[l.bytes.clone()]);
            }
        }
        self.flush_if_full()
    }

    fn message<M: Message>(&mut self, tag: u32, m: &M) -> Result<(), PprofError> {
        prost::encoding::message::encode(tag, m, &mut self.buf);
        self.flush_if_full()
    }

    /// Writes the mapping, location and function tables.
    fn tables(&mut self) -> Result<(), PprofError> {
        let dict = self.dict;
        // Mapping ids in dictionary order, not first use: pprof tools take
        // mapping 1 for the main binary (`File:` in `-top`, symbolization),
        // and an imported pprof keeps its mapping order in the dictionary.
        self.mappings.sort_unstable();
        for (pos, &slot) in self.mappings.iter().enumerate() {
            self.mapping_ids[slot] = pos as u32 + 1;
        }
        // What the file's locations say about each mapping, for mappings
        // that do not carry pprof's has_* flags themselves.
        let mut inferred = vec![[false; 4]; self.mappings.len()];
        let mut location = proto::Location::default();
        for i in 0..self.locations.len() {
            let loc = self.lookup.location(self.locations[i] as i32);
            let mapping_id = self.mapping_id(loc.mapping_index)?;
            location.line.clear();
            for l in &loc.lines {
                location.line.push(proto::Line {
                    function_id: u64::from(self.function_id(l.function_index)?),
                    line: l.line,
                    column: l.column,
                });
            }
            if mapping_id != 0 {
                let f = &mut inferred[mapping_id as usize - 1];
                for l in &loc.lines {
                    let func = self.lookup.function(l.function_index);
                    f[0] |= func.name_strindex != 0 || func.system_name_strindex != 0;
                    f[1] |= func.filename_strindex != 0;
                    f[2] |= l.line != 0;
                }
                f[3] |= loc.lines.len() > 1;
            }
            location.id = id_of(i);
            location.mapping_id = u64::from(mapping_id);
            location.address = loc.address;
            location.is_folded = self
                .bool_attribute(&loc.attribute_indices, keys::LOCATION_IS_FOLDED)?
                .unwrap_or(false);
            put_location(&mut self.buf, &location);
            self.flush_if_full()?;
        }

        for i in 0..self.functions.len() {
            let f = self.lookup.function(self.functions[i] as i32);
            let msg = proto::Function {
                id: id_of(i),
                name: self.string(f.name_strindex, "function name")?,
                system_name: self.string(f.system_name_strindex, "function system name")?,
                filename: self.string(f.filename_strindex, "function file name")?,
                start_line: f.start_line,
            };
            put_function(&mut self.buf, &msg);
            self.flush_if_full()?;
        }

        for (i, inferred) in inferred.into_iter().enumerate() {
            let m = &dict.mapping_table[self.mappings[i]];
            let explicit = [
                keys::HAS_FUNCTIONS,
                keys::HAS_FILENAMES,
                keys::HAS_LINE_NUMBERS,
                keys::HAS_INLINE_FRAMES,
            ]
            .map(|k| self.bool_attribute(&m.attribute_indices, k));
            let mut flags = inferred;
            if explicit.iter().any(|f| matches!(f, Ok(Some(_)))) {
                for (f, e) in flags.iter_mut().zip(explicit) {
                    *f = e?.unwrap_or(false);
                }
            }
            let msg = proto::Mapping {
                id: id_of(i),
                memory_start: m.memory_start,
                memory_limit: m.memory_limit,
                file_offset: m.file_offset,
                filename: self.string(m.filename_strindex, "mapping file name")?,
                build_id: self.build_id(&m.attribute_indices)?,
                has_functions: flags[0],
                has_filenames: flags[1],
                has_line_numbers: flags[2],
                has_inline_frames: flags[3],
            };
            self.message(tags::profile::MAPPING, &msg)?;
        }
        Ok(())
    }

    /// Attribute `i`, checked: index 0 of an empty table is the zero value.
    fn attribute_entry(&self, i: i32) -> Result<&'a KeyValueAndUnit, PprofError> {
        slot(i, self.attributes.len(), "attribute")?;
        Ok(self.lookup.attribute(i))
    }

    /// The attribute named `key` among `indices`.
    fn find_attribute(
        &self,
        indices: &[i32],
        key: &str,
    ) -> Result<Option<&'a AnyValue>, PprofError> {
        let dict = self.dict;
        for &i in indices {
            let a = self.attribute_entry(i)?;
            if string(dict, a.key_strindex, "attribute key")? == key {
                return Ok(a.value.as_ref());
            }
        }
        Ok(None)
    }

    fn bool_attribute(&self, indices: &[i32], key: &str) -> Result<Option<bool>, PprofError> {
        Ok(
            match self
                .find_attribute(indices, key)?
                .and_then(|v| v.value.as_ref())
            {
                Some(Value::BoolValue(b)) => Some(*b),
                _ => None,
            },
        )
    }

    fn string_attribute(&self, indices: &[i32], key: &str) -> Result<Option<&'a str>, PprofError> {
        Ok(
            match self
                .find_attribute(indices, key)?
                .and_then(|v| v.value.as_ref())
            {
                Some(Value::StringValue(s)) => Some(s.as_str()),
                Some(Value::StringValueStrindex(i)) => Some(string(self.dict, *i, key)?),
                _ => None,
            },
        )
    }

    /// A mapping's build id from its `process.executable.build_id.*`
    /// attributes, the preferred kind first.
    fn build_id(&mut self, indices: &[i32]) -> Result<i64, PprofError> {
        for key in keys::BUILD_ID_PREFERENCE {
            if let Some(v) = self.find_attribute(indices, key)? {
                return self.build_id_value(v);
            }
        }
        let dict = self.dict;
        for &i in indices {
            let a = self.attribute_entry(i)?;
            if string(dict, a.key_strindex, "attribute key")?.starts_with(keys::BUILD_ID_PREFIX) {
                if let Some(v) = &a.value {
                    return self.build_id_value(v);
                }
            }
        }
        Ok(0)
    }

    fn build_id_value(&mut self, v: &'a AnyValue) -> Result<i64, PprofError> {
        Ok(match &v.value {
            Some(Value::StringValue(s)) => self.strings.borrowed(s),
            Some(Value::StringValueStrindex(i)) => self.string(*i, "build id")?,
            Some(_) => self.strings.intern(Cow::Owned(render(v, self.dict))),
            None => 0,
        })
    }
}

/// Longest profile attribute value written as a label; see [`profile_comment`].
const MAX_PROFILE_LABEL_LEN: usize = 256;

/// A profile attribute too large or too structured for a label (Sentry's
/// `sentry.measurements` JSON, `sentry.thread_metadata`), as key and value.
/// Labels group and filter samples, and a profile attribute is repeated on
/// every sample; as comments, viewers would print kilobytes of JSON atop
/// every report. They are left out of the pprof file (they stay
/// attributes in OTLP), named in one short comment.
fn profile_comment(dict: &ProfilesDictionary, idx: i32) -> Option<(&str, &AnyValue)> {
    let a = dict.attribute_table.get(usize::try_from(idx).ok()?)?;
    let v = a.value.as_ref()?;
    let long = |s: &str| s.len() > MAX_PROFILE_LABEL_LEN;
    let document = match v.value.as_ref()? {
        Value::KvlistValue(_) => true,
        Value::StringValue(s) => long(s),
        Value::StringValueStrindex(i) => string(dict, *i, "attribute value").is_ok_and(long),
        Value::BytesValue(b) => b.len() * 2 > MAX_PROFILE_LABEL_LEN,
        _ => false,
    };
    let key = string(dict, a.key_strindex, "attribute key").ok()?;
    document.then_some((key, v))
}

/// Lines of a `pprof.profile.comment` attribute (`string[]`, or one string).
fn comment_lines<'a>(v: &'a AnyValue, dict: &'a ProfilesDictionary, out: &mut Vec<Cow<'a, str>>) {
    match &v.value {
        Some(Value::ArrayValue(a)) => {
            for v in &a.values {
                comment_lines(v, dict, out);
            }
        }
        Some(Value::StringValue(s)) => out.push(Cow::Borrowed(s)),
        Some(_) => out.push(Cow::Owned(render(v, dict))),
        None => {}
    }
}

/// Writes `file` as an uncompressed pprof `Profile` to `out`: sample
/// types, samples (streamed), tables, then the informational fields and
/// the string table every earlier step added to.
pub fn write_pprof<W: Write>(
    data: &ProfilesData,
    file: &PprofFile,
    opts: &ToPprofOptions,
    out: W,
) -> Result<W, PprofError> {
    let dict = profcol_model::proto::dictionary_of(data);
    let rp = data
        .resource_profiles
        .get(file.resource)
        .ok_or_else(|| invalid(format!("resource {} out of range", file.resource)))?;
    let columns = columns(rp, file)?;

    let mut e = Encoder::new(dict, out);
    for t in &file.sample_types {
        let vt = proto::ValueType {
            r#type: e.strings.borrowed(&t.r#type),
            unit: e.strings.borrowed(&t.unit),
        };
        e.message(tags::profile::SAMPLE_TYPE, &vt)?;
    }
    let resource_labels = e.resource_labels(rp, opts)?;
    e.samples(&columns, &resource_labels)?;
    e.tables()?;
    let fields = e.profile_fields(&columns, rp, file, opts)?;
    e.string_table()?;
    e.finish(&fields)
}

/// The profiles of each column (sample type) of `file`, checked to line up
/// sample by sample with the first column's.
fn columns<'d>(
    rp: &'d ResourceProfiles,
    file: &PprofFile,
) -> Result<Vec<Vec<&'d Profile>>, PprofError> {
    let columns = file
        .columns
        .iter()
        .map(|c| {
            c.iter()
                .map(|r| profile_at(rp, r))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    let Some(first_column) = columns.first() else {
        return Err(invalid(
            "a pprof file needs at least one sample type".into(),
        ));
    };
    if file.sample_types.len() != columns.len() {
        return Err(invalid("one sample type per column expected".into()));
    }
    for c in &columns[1..] {
        let lined_up = c.len() == first_column.len()
            && c.iter()
                .zip(first_column)
                .all(|(a, b)| a.samples.len() == b.samples.len());
        if !lined_up {
            return Err(invalid(
                "profiles merged into one pprof file do not line up".into(),
            ));
        }
    }
    Ok(columns)
}

fn profile_at<'d>(rp: &'d ResourceProfiles, r: &ProfileRef) -> Result<&'d Profile, PprofError> {
    rp.scope_profiles
        .get(r.scope)
        .and_then(|s| s.profiles.get(r.profile))
        .ok_or_else(|| invalid(format!("profile {r:?} out of range")))
}

/// `Profile` fields written after the string table is complete:
/// informational, taken from every profile in the file.
struct ProfileFields {
    drop_frames: i64,
    keep_frames: i64,
    doc_url: i64,
    time_nanos: u64,
    duration_nanos: u64,
    period_type: Option<proto::ValueType>,
    period: i64,
    comments: Vec<i64>,
    default_sample_type: i64,
}

impl<'a, W: Write> Encoder<'a, W> {
    /// Labels of the resource attributes `opts` asks for, encoded once for
    /// every sample.
    fn resource_labels(
        &mut self,
        rp: &'a ResourceProfiles,
        opts: &'a ToPprofOptions,
    ) -> Result<Vec<Labels>, PprofError> {
        let mut labels = Vec::new();
        let Some(resource) = &rp.resource else {
            return Ok(labels);
        };
        for key in &opts.resource_attributes_as_labels {
            let found = resource
                .attributes
                .iter()
                .find(|kv| kv_key(self.dict, kv) == key.as_str());
            if let Some(value) = found.and_then(|kv| kv.value.as_ref()) {
                let k = self.strings.borrowed(key);
                let start = self.labels.len();
                self.push_value(k, value, 0)?;
                labels.push(Labels {
                    bytes: start..self.labels.len(),
                    key: k,
                });
            }
        }
        Ok(labels)
    }

    /// Writes every sample, one value per column; per profile its own
    /// labels go in front of the resource's.
    fn samples(
        &mut self,
        columns: &[Vec<&'a Profile>],
        resource_labels: &[Labels],
    ) -> Result<(), PprofError> {
        let dict = self.dict;
        let first_column = &columns[0];
        self.prepare_stacks(first_column.iter().flat_map(|p| &p.samples))?;
        let mut values = Vec::with_capacity(columns.len());
        let mut extra = Vec::new();
        for (j, p) in first_column.iter().enumerate() {
            extra.clear();
            for ai in label_attributes(dict, p) {
                if profile_comment(dict, ai).is_none() {
                    extra.push(self.attribute(ai)?);
                }
            }
            extra.extend(resource_labels.iter().cloned());
            for (i, s) in p.samples.iter().enumerate() {
                values.clear();
                values.push(sample_value(s));
                for c in &columns[1..] {
                    values.push(sample_value(&c[j].samples[i]));
                }
                self.sample(s, &values, &extra)?;
            }
        }
        Ok(())
    }

    /// The informational fields, interning their strings in a fixed order
    /// (frame filters, period type, default sample type, comments).
    fn profile_fields(
        &mut self,
        columns: &[Vec<&'a Profile>],
        rp: &'a ResourceProfiles,
        file: &'a PprofFile,
        opts: &'a ToPprofOptions,
    ) -> Result<ProfileFields, PprofError> {
        let all: Vec<&Profile> = columns.iter().flatten().copied().collect();
        let first = all[0];
        let [drop_frames, keep_frames, doc_url] = self.first_string_attributes(&all)?;
        let start = file.time_unix_nano;
        let end = end_time(start, &all);
        let period_type = match first.period_type {
            Some(pt) => Some(proto::ValueType {
                r#type: self.string(pt.type_strindex, "period_type")?,
                unit: self.string(pt.unit_strindex, "period_type")?,
            }),
            None => None,
        };
        let comments = self.comment_lines(&all, rp, file, opts)?;
        let default_sample_type = self.default_sample_type(rp, file);
        let comments = comments
            .into_iter()
            .map(|c| self.strings.intern(c))
            .collect();
        Ok(ProfileFields {
            drop_frames,
            keep_frames,
            doc_url,
            time_nanos: start,
            duration_nanos: end.saturating_sub(start),
            period_type,
            period: first.period,
            comments,
            default_sample_type,
        })
    }

    /// drop_frames, keep_frames, doc_url: each from the first profile that
    /// has one.
    fn first_string_attributes(&mut self, all: &[&'a Profile]) -> Result<[i64; 3], PprofError> {
        let mut fields = [0i64; 3];
        for p in all {
            for (field, key) in
                fields
                    .iter_mut()
                    .zip([keys::DROP_FRAMES, keys::KEEP_FRAMES, keys::DOC_URL])
            {
                if *field == 0 {
                    if let Some(s) = self.string_attribute(&p.attribute_indices, key)? {
                        *field = self.strings.borrowed(s);
                    }
                }
            }
        }
        Ok(fields)
    }

    /// Comments: the original ones (a pprof that went through OTLP), then
    /// lines naming the source, without repeating a line already there.
    fn comment_lines(
        &self,
        all: &[&'a Profile],
        rp: &'a ResourceProfiles,
        file: &PprofFile,
        opts: &'a ToPprofOptions,
    ) -> Result<Vec<Cow<'a, str>>, PprofError> {
        let dict = self.dict;
        let mut comments: Vec<Cow<str>> = Vec::new();
        for p in all {
            let before = comments.len();
            if let Some(v) = self.find_attribute(&p.attribute_indices, keys::COMMENT)? {
                let mut lines = Vec::new();
                comment_lines(v, dict, &mut lines);
                // Profiles split from one pprof each carry its comments.
                if !comments[..before].iter().eq(lines.iter()) {
                    comments.extend(lines);
                }
            }
        }
        let mut source = vec![Cow::Borrowed("profcol: converted from OTLP profiles")];
        for r in file.columns.iter().flatten() {
            let sp = &rp.scope_profiles[r.scope];
            if let Some(scope) = sp.scope.as_ref().filter(|s| !s.name.is_empty()) {
                source.push(Cow::Owned(
                    format!("profcol: scope {} {}", scope.name, scope.version)
                        .trim_end()
                        .to_owned(),
                ));
            }
            let p = profile_at(rp, r)?;
            if !p.original_payload_format.is_empty() {
                source.push(Cow::Owned(format!(
                    "profcol: original format {}",
                    p.original_payload_format
                )));
            }
        }
        source.extend(opts.comments.iter().map(|c| Cow::Borrowed(c.as_str())));
        let mut omitted: Vec<String> = Vec::new();
        for p in all {
            for ai in label_attributes(dict, p) {
                if let Some((key, v)) = profile_comment(dict, ai) {
                    let note = format!("{key} ({} bytes)", render(v, dict).len());
                    if !omitted.contains(&note) {
                        omitted.push(note);
                    }
                }
            }
        }
        if !omitted.is_empty() {
            source.push(Cow::Owned(format!(
                "profcol: profile attributes too large for labels, not written: {}",
                omitted.join(", ")
            )));
        }
        for line in source {
            if !comments.contains(&line) {
                comments.push(line);
            }
        }
        Ok(comments)
    }

    /// The first scope's `pprof.default_sample_type` that names one of the
    /// file's sample types.
    fn default_sample_type(&mut self, rp: &'a ResourceProfiles, file: &PprofFile) -> i64 {
        for r in file.columns.iter().flatten() {
            let Some(scope) = &rp.scope_profiles[r.scope].scope else {
                continue;
            };
            for kv in &scope.attributes {
                if kv_key(self.dict, kv) != keys::DEFAULT_SAMPLE_TYPE {
                    continue;
                }
                if let Some(Value::StringValue(t)) =
                    kv.value.as_ref().and_then(|v| v.value.as_ref())
                {
                    if file.sample_types.iter().any(|st| &st.r#type == t) {
                        return self.strings.borrowed(t);
                    }
                }
            }
        }
        0
    }

    fn string_table(&mut self) -> Result<(), PprofError> {
        for s in self.strings.values() {
            put_len_prefix(&mut self.buf, tags::profile::STRING_TABLE, s.len());
            self.buf.extend_from_slice(s.as_bytes());
            if self.buf.len() >= FLUSH_AT {
                self.out.write_all(&self.buf)?;
                self.buf.clear();
            }
        }
        Ok(())
    }

    /// Writes the informational fields and hands back the output.
    fn finish(mut self, f: &ProfileFields) -> Result<W, PprofError> {
        let b = &mut self.buf;
        put_varint_field(b, tags::profile::DROP_FRAMES, f.drop_frames as u64);
        put_varint_field(b, tags::profile::KEEP_FRAMES, f.keep_frames as u64);
        put_varint_field(b, tags::profile::TIME_NANOS, f.time_nanos);
        put_varint_field(b, tags::profile::DURATION_NANOS, f.duration_nanos);
        if let Some(pt) = &f.period_type {
            prost::encoding::message::encode(tags::profile::PERIOD_TYPE, pt, b);
        }
        put_varint_field(b, tags::profile::PERIOD, f.period as u64);
        if !f.comments.is_empty() {
            prost::encoding::int64::encode_packed(tags::profile::COMMENT, &f.comments, b);
        }
        put_varint_field(
            b,
            tags::profile::DEFAULT_SAMPLE_TYPE,
            f.default_sample_type as u64,
        );
        put_varint_field(b, tags::profile::DOC_URL, f.doc_url as u64);
        self.out.write_all(&self.buf)?;
        Ok(self.out)
    }
}

/// The latest end of the profiles; one without a time starts at `start`.
fn end_time(start: u64, all: &[&Profile]) -> u64 {
    all.iter()
        .map(|p| {
            let t = if p.time_unix_nano == 0 {
                start
            } else {
                p.time_unix_nano
            };
            t.saturating_add(p.duration_nano)
        })
        .max()
        .unwrap_or(start)
}

/// Writes `file` gzip-compressed at `level` (0-9) to `out`, streaming: the
/// compressed bytes reach `out` in pieces of 128 KiB or more, so `out` (a
/// `File`) needs no buffering of its own. Files past 64 KiB are compressed
/// on the other cores while they are encoded.
pub fn write_pprof_gzip<W: Write + Send>(
    data: &ProfilesData,
    file: &PprofFile,
    opts: &ToPprofOptions,
    level: u32,
    out: W,
) -> Result<W, PprofError> {
    std::thread::scope(|scope| {
        let mut gz = GzipWriter::new(out, level, scope);
        let written = write_pprof(data, file, opts, &mut gz).map(drop);
        // Finished on error too: it joins the compression threads.
        let out = gz.finish();
        written?;
        Ok(out?)
    })
}

/// `file` as a gzip-compressed pprof file in memory.
pub fn encode_pprof_gzip(
    data: &ProfilesData,
    file: &PprofFile,
    opts: &ToPprofOptions,
) -> Result<Vec<u8>, PprofError> {
    write_pprof_gzip(data, file, opts, super::DEFAULT_GZIP_LEVEL, Vec::new())
}

/// Every pprof file of `data`, decoded: for tests and tools that want the
/// messages rather than bytes.
pub fn to_pprof(
    data: &ProfilesData,
    opts: &ToPprofOptions,
) -> Result<Vec<(PprofFile, proto::Profile)>, PprofError> {
    plan_files(data, opts)?
        .into_iter()
        .map(|f| {
            let bytes = write_pprof(data, &f, opts, Vec::new())?;
            Ok((f, proto::Profile::decode(bytes.as_slice())?))
        })
        .collect()
}

#[cfg(test)]
mod hand_encoding_tests {
    use super::*;

    #[test]
    fn locations_and_functions_are_encoded_as_prost_encodes_them() {
        let line = |function_id, line, column| proto::Line {
            function_id,
            line,
            column,
        };
        let locations = [
            proto::Location::default(),
            proto::Location {
                id: 1,
                mapping_id: 0,
                address: 0x40_1234,
                line: vec![],
                is_folded: false,
            },
            proto::Location {
                id: 300,
                mapping_id: 2,
                address: u64::MAX,
                line: vec![line(1, 12, 0), line(0, -1, 7), line(70_000, 0, -3)],
                is_folded: true,
            },
        ];
        for l in &locations {
            let mut ours = Vec::new();
            put_location(&mut ours, l);
            let mut theirs = Vec::new();
            prost::encoding::message::encode(tags::profile::LOCATION, l, &mut theirs);
            assert_eq!(ours, theirs, "{l:?}");
        }
        let functions = [
            proto::Function::default(),
            proto::Function {
                id: 1,
                name: 5,
                system_name: 5,
                filename: 0,
                start_line: 0,
            },
            proto::Function {
                id: 100_000,
                name: 1 << 40,
                system_name: 3,
                filename: 200,
                start_line: -2,
            },
        ];
        for f in &functions {
            let mut ours = Vec::new();
            put_function(&mut ours, f);
            let mut theirs = Vec::new();
            prost::encoding::message::encode(tags::profile::FUNCTION, f, &mut theirs);
            assert_eq!(ours, theirs, "{f:?}");
        }
    }
}
