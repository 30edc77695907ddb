//! pprof -> OTLP.
//!
//! One pprof file becomes one `ScopeProfiles` with one `Profile` per sample
//! type (OTLP profiles have a single sample type), all sharing stacks and
//! attributes through the dictionary. Labels become sample attributes (a key
//! with several values becomes an array; `num_unit` becomes the unit), a
//! `trace_id` + `span_id` label pair becomes a `Link`, and the pprof fields
//! OTLP lacks become the semantic-convention attributes in [`super::keys`].
//! Ids may be any unique nonzero numbers; references to unknown location or
//! function ids, string indices out of range and sample value counts that do
//! not match the sample types are errors, as in pprof's own `CheckValid`. An
//! unknown mapping id is read as no mapping, as Go's parser reads it, with a
//! warning.

use std::io::Read;

use flate2::read::MultiGzDecoder;
use prost::Message;

use super::{keys, proto, PprofError};
use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{
    any_value::Value, AnyValue, ArrayValue, Function, InstrumentationScope, KeyValue, Line, Link,
    Location, Mapping, Profile, ProfilesData, ResourceProfiles, Sample, ScopeProfiles, ValueType,
};

/// Decodes a pprof file, gzip-compressed (as written to disk) or plain.
pub fn decode_pprof(bytes: &[u8]) -> Result<proto::Profile, PprofError> {
    decode_pprof_limited(bytes, usize::MAX)
}

/// [`decode_pprof`] refusing anything larger than `max_decoded` bytes once
/// decompressed, so a small gzip bomb cannot exhaust memory.
pub fn decode_pprof_limited(
    bytes: &[u8],
    max_decoded: usize,
) -> Result<proto::Profile, PprofError> {
    let too_large = || {
        PprofError::Gzip(std::io::Error::other(format!(
            "decompressed pprof exceeds {max_decoded} bytes"
        )))
    };
    // No protobuf message starts with 0x1f (field 3, wire type 7 does not
    // exist), so the gzip magic is unambiguous.
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut raw = Vec::new();
        let limit = u64::try_from(max_decoded)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        MultiGzDecoder::new(bytes)
            .take(limit)
            .read_to_end(&mut raw)
            .map_err(PprofError::Gzip)?;
        if raw.len() > max_decoded {
            return Err(too_large());
        }
        decode_profile(&raw)
    } else {
        if bytes.len() > max_decoded {
            return Err(too_large());
        }
        decode_profile(bytes)
    }
}

/// Decodes a `Profile`. Go's pprof writes and reads the string table as
/// raw bytes, so a file naming a Latin-1 path or a symbol cut mid-character
/// is valid to every pprof tool but not a protobuf `string`: rather than
/// refuse the whole profile, such strings are decoded lossily (U+FFFD).
fn decode_profile(raw: &[u8]) -> Result<proto::Profile, PprofError> {
    proto::Profile::decode(raw).or_else(|e| decode_lossy(raw).ok_or(PprofError::Decode(e)))
}

/// [`decode_profile`]'s slow path: the top-level fields are copied without
/// the string table, which is decoded on the side.
fn decode_lossy(raw: &[u8]) -> Option<proto::Profile> {
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    let mut rest = Vec::with_capacity(raw.len());
    let mut strings = Vec::new();
    let mut buf = raw;
    while !buf.is_empty() {
        let field = buf;
        let (tag, wire_type) = decode_key(&mut buf).ok()?;
        if tag == proto::tags::profile::STRING_TABLE && wire_type == WireType::LengthDelimited {
            let len = usize::try_from(decode_varint(&mut buf).ok()?).ok()?;
            let s = buf.get(..len)?;
            strings.push(String::from_utf8_lossy(s).into_owned());
            buf = &buf[len..];
        } else {
            skip_field(wire_type, tag, &mut buf, DecodeContext::default()).ok()?;
            rest.extend_from_slice(&field[..field.len() - buf.len()]);
        }
    }
    let mut p = proto::Profile::decode(rest.as_slice()).ok()?;
    p.string_table = strings;
    Some(p)
}

/// pprof ids -> positions in their table.
enum Ids {
    /// `id -> position + 1`, when ids are small (the usual 1..=n).
    Dense(Vec<u32>),
    Sparse(ahash::HashMap<u64, u32>),
}

impl Ids {
    fn new(
        ids: impl ExactSizeIterator<Item = u64> + Clone,
        what: &str,
    ) -> Result<Self, PprofError> {
        let n = ids.len();
        let max = ids.clone().max().unwrap_or(0);
        let dup = || PprofError::InvalidPprof(format!("duplicate {what} id"));
        if max <= (n as u64).saturating_mul(4).saturating_add(16) {
            let mut dense = vec![0u32; max as usize + 1];
            for (pos, id) in ids.enumerate() {
                if id == 0 {
                    return Err(PprofError::InvalidPprof(format!("{what} id 0")));
                }
                if std::mem::replace(&mut dense[id as usize], pos as u32 + 1) != 0 {
                    return Err(dup());
                }
            }
            Ok(Self::Dense(dense))
        } else {
            let mut sparse = ahash::HashMap::default();
            for (pos, id) in ids.enumerate() {
                if id == 0 {
                    return Err(PprofError::InvalidPprof(format!("{what} id 0")));
                }
                if sparse.insert(id, pos as u32).is_some() {
                    return Err(dup());
                }
            }
            Ok(Self::Sparse(sparse))
        }
    }

    fn position(&self, id: u64) -> Option<usize> {
        match self {
            Self::Dense(v) => v
                .get(usize::try_from(id).ok()?)
                .filter(|&&p| p != 0)
                .map(|&p| p as usize - 1),
            Self::Sparse(m) => m.get(&id).map(|&p| p as usize),
        }
    }
}

const UNSEEN: i32 = -1;

struct Importer<'p, 'd> {
    p: &'p proto::Profile,
    dict: &'d mut DictionaryBuilder,
    /// pprof index/position -> OTLP dictionary index, interned on first use
    /// so nothing unreferenced lands in the dictionary (mappings excepted,
    /// see [`import_pprof`]).
    strings: Vec<i32>,
    function_ids: Ids,
    functions: Vec<i32>,
    mapping_ids: Ids,
    mappings: Vec<i32>,
    location_ids: Vec<i32>,
    locations: Ids,
    /// Attribute index of each distinct single-valued label.
    labels: ahash::HashMap<proto::Label, i32>,
    /// Locations naming a mapping id the profile does not have, and the
    /// first such id, for one warning per profile.
    unknown_mappings: (usize, u64),
}

fn invalid(msg: String) -> PprofError {
    PprofError::InvalidPprof(msg)
}

fn parse_hex_id(s: &str, bytes: usize) -> Option<Vec<u8>> {
    if s.len() != bytes * 2 {
        return None;
    }
    let id = hex::decode(s).ok()?;
    id.iter().any(|&b| b != 0).then_some(id)
}

impl<'p> Importer<'p, '_> {
    fn str_at(&self, idx: i64) -> Result<&'p str, PprofError> {
        let p = self.p;
        usize::try_from(idx)
            .ok()
            .and_then(|i| p.string_table.get(i))
            .map(String::as_str)
            .ok_or_else(|| invalid(format!("string index {idx} out of range")))
    }

    fn string(&mut self, idx: i64) -> Result<i32, PprofError> {
        let s = self.str_at(idx)?;
        let slot = idx as usize;
        if self.strings[slot] == UNSEEN {
            self.strings[slot] = self.dict.string(s);
        }
        Ok(self.strings[slot])
    }

    fn bool_attribute(&mut self, key: &str, v: bool) -> i32 {
        self.dict.attribute_kv(
            key,
            AnyValue {
                value: Some(Value::BoolValue(v)),
            },
            "",
        )
    }

    fn function(&mut self, id: u64) -> Result<i32, PprofError> {
        // A line without a function, as pprof's own parser allows: the
        // dictionary's empty function.
        if id == 0 {
            return Ok(0);
        }
        let pos = self
            .function_ids
            .position(id)
            .ok_or_else(|| invalid(format!("unknown function id {id}")))?;
        if self.functions[pos] == UNSEEN {
            let f = &self.p.function[pos];
            let f = Function {
                name_strindex: self.string(f.name)?,
                system_name_strindex: self.string(f.system_name)?,
                filename_strindex: self.string(f.filename)?,
                start_line: f.start_line,
            };
            self.functions[pos] = self.dict.function(f);
        }
        Ok(self.functions[pos])
    }

    fn mapping(&mut self, id: u64) -> Result<i32, PprofError> {
        if id == 0 {
            return Ok(0);
        }
        let Some(pos) = self.mapping_ids.position(id) else {
            // Go's parser reads an unknown mapping id as no mapping (a nil
            // `Location.Mapping`), which its tools accept: so does profcol.
            if self.unknown_mappings.0 == 0 {
                self.unknown_mappings.1 = id;
            }
            self.unknown_mappings.0 += 1;
            return Ok(0);
        };
        if self.mappings[pos] == UNSEEN {
            let m = &self.p.mapping[pos];
            let mut attrs = Vec::with_capacity(5);
            let build_id = self.str_at(m.build_id)?;
            if !build_id.is_empty() {
                let v = AnyValue {
                    value: Some(Value::StringValue(build_id.to_owned())),
                };
                attrs.push(self.dict.attribute_kv(keys::BUILD_ID_GNU, v, ""));
            }
            // All four flags, false ones too: a mapping without them is
            // taken to be OTLP-native and gets flags inferred on the way back.
            for (key, v) in [
                (keys::HAS_FUNCTIONS, m.has_functions),
                (keys::HAS_FILENAMES, m.has_filenames),
                (keys::HAS_LINE_NUMBERS, m.has_line_numbers),
                (keys::HAS_INLINE_FRAMES, m.has_inline_frames),
            ] {
                attrs.push(self.bool_attribute(key, v));
            }
            let mapping = Mapping {
                memory_start: m.memory_start,
                memory_limit: m.memory_limit,
                file_offset: m.file_offset,
                filename_strindex: self.string(m.filename)?,
                attribute_indices: attrs,
            };
            self.mappings[pos] = self.dict.mapping(mapping);
        }
        Ok(self.mappings[pos])
    }

    fn location(&mut self, id: u64) -> Result<i32, PprofError> {
        let pos = self
            .locations
            .position(id)
            .ok_or_else(|| invalid(format!("unknown location id {id}")))?;
        if self.location_ids[pos] == UNSEEN {
            let l = &self.p.location[pos];
            let mut lines = Vec::with_capacity(l.line.len());
            for line in &l.line {
                lines.push(Line {
                    function_index: self.function(line.function_id)?,
                    line: line.line,
                    column: line.column,
                });
            }
            let mut attrs = Vec::new();
            if l.is_folded {
                attrs.push(self.bool_attribute(keys::LOCATION_IS_FOLDED, true));
            }
            let loc = Location {
                mapping_index: self.mapping(l.mapping_id)?,
                address: l.address,
                lines,
                attribute_indices: attrs,
            };
            self.location_ids[pos] = self.dict.location(loc);
        }
        Ok(self.location_ids[pos])
    }

    fn label_value(&self, l: &proto::Label) -> Result<AnyValue, PprofError> {
        Ok(AnyValue {
            value: Some(if l.str != 0 {
                Value::StringValue(self.str_at(l.str)?.to_owned())
            } else {
                Value::IntValue(l.num)
            }),
        })
    }

    /// Attribute of a key's only label, hash-consed by the label itself so a
    /// repeated label costs one lookup.
    fn single_label(&mut self, l: &proto::Label) -> Result<i32, PprofError> {
        if let Some(&i) = self.labels.get(l) {
            return Ok(i);
        }
        let key = self.str_at(l.key)?.to_owned();
        let unit = if l.str == 0 {
            self.str_at(l.num_unit)?
        } else {
            ""
        }
        .to_owned();
        let i = self.dict.attribute_kv(&key, self.label_value(l)?, &unit);
        self.labels.insert(*l, i);
        Ok(i)
    }

    /// Attribute indices and link index of a sample's labels.
    fn sample_labels(&mut self, labels: &[proto::Label]) -> Result<(Vec<i32>, i32), PprofError> {
        if labels.is_empty() {
            return Ok((Vec::new(), 0));
        }
        // One pass: where the trace/span labels are and whether any key
        // repeats (samples have a few labels; compare pairwise).
        let (mut trace, mut span) = ((0usize, None), (0usize, None));
        let mut has_duplicates = false;
        for (i, l) in labels.iter().enumerate() {
            let k = self.str_at(l.key)?;
            if k == keys::TRACE_ID_LABEL {
                trace = (trace.0 + 1, Some(i));
            } else if k == keys::SPAN_ID_LABEL {
                span = (span.0 + 1, Some(i));
            }
            if !has_duplicates {
                for m in &labels[..i] {
                    if m.key == l.key || self.str_at(m.key)? == k {
                        has_duplicates = true;
                        break;
                    }
                }
            }
        }

        // A single trace_id + span_id pair of hex strings is a Link.
        let mut link = 0;
        let mut link_labels = [usize::MAX; 2];
        if let ((1, Some(t)), (1, Some(s))) = (trace, span) {
            let hex_id = |this: &Self,
                          l: &proto::Label,
                          len: usize|
             -> Result<Option<Vec<u8>>, PprofError> {
                Ok(if l.str == 0 {
                    None
                } else {
                    parse_hex_id(this.str_at(l.str)?, len)
                })
            };
            if let (Some(trace_id), Some(span_id)) =
                (hex_id(self, &labels[t], 16)?, hex_id(self, &labels[s], 8)?)
            {
                link = self.dict.link(Link { trace_id, span_id });
                link_labels = [t, s];
            }
        }

        let mut attrs = Vec::with_capacity(labels.len());
        if !has_duplicates {
            for (i, l) in labels.iter().enumerate() {
                if !link_labels.contains(&i) {
                    attrs.push(self.single_label(l)?);
                }
            }
            return Ok((attrs, link));
        }

        // Several labels with one key: OTLP wants keys unique per sample, so
        // they become one array attribute, in order of first appearance.
        let mut done = vec![false; labels.len()];
        for i in 0..labels.len() {
            if done[i] || link_labels.contains(&i) {
                continue;
            }
            let key = self.str_at(labels[i].key)?;
            let group: Vec<usize> = (i..labels.len())
                .filter(|&j| self.str_at(labels[j].key).is_ok_and(|k| k == key))
                .collect();
            if group.len() == 1 {
                attrs.push(self.single_label(&labels[i])?);
                done[i] = true;
                continue;
            }
            let mut values = Vec::with_capacity(group.len());
            let mut unit = "";
            for &j in &group {
                done[j] = true;
                values.push(self.label_value(&labels[j])?);
                if unit.is_empty() && labels[j].str == 0 {
                    unit = self.str_at(labels[j].num_unit)?;
                }
            }
            let (key, unit) = (key.to_owned(), unit.to_owned());
            let value = AnyValue {
                value: Some(Value::ArrayValue(ArrayValue { values })),
            };
            attrs.push(self.dict.attribute_kv(&key, value, &unit));
        }
        Ok((attrs, link))
    }
}

/// Converts one pprof profile into a `ScopeProfiles` whose indices point
/// into `dict`, so several files can share one dictionary.
pub fn import_pprof(
    p: &proto::Profile,
    dict: &mut DictionaryBuilder,
) -> Result<ScopeProfiles, PprofError> {
    if p.string_table.first().is_some_and(|s| !s.is_empty()) {
        return Err(invalid("string_table[0] must be \"\"".into()));
    }
    if p.sample_type.is_empty() && !p.sample.is_empty() {
        return Err(invalid("samples without sample types".into()));
    }
    if p.string_table.is_empty() {
        // Everything refers to index 0; give it its "" so lookups succeed.
        let p = proto::Profile {
            string_table: vec![String::new()],
            ..p.clone()
        };
        return import_pprof(&p, dict);
    }
    let mut im = Importer {
        p,
        dict,
        strings: vec![UNSEEN; p.string_table.len()],
        function_ids: Ids::new(p.function.iter().map(|f| f.id), "function")?,
        functions: vec![UNSEEN; p.function.len()],
        mapping_ids: Ids::new(p.mapping.iter().map(|m| m.id), "mapping")?,
        mappings: vec![UNSEEN; p.mapping.len()],
        locations: Ids::new(p.location.iter().map(|l| l.id), "location")?,
        location_ids: vec![UNSEEN; p.location.len()],
        labels: ahash::HashMap::default(),
        unknown_mappings: (0, 0),
    };
    // Every mapping, in order, before locations pull them in by first use:
    // mapping 1 is the main binary by convention, and the exporter writes
    // mappings in dictionary order.
    for m in &p.mapping {
        im.mapping(m.id)?;
    }
    // Profile-level attributes, shared by every sample type's profile.
    let mut profile_attrs = Vec::new();
    if !p.comment.is_empty() {
        let mut lines = Vec::with_capacity(p.comment.len());
        for &c in &p.comment {
            lines.push(AnyValue {
                value: Some(Value::StringValue(im.str_at(c)?.to_owned())),
            });
        }
        let v = AnyValue {
            value: Some(Value::ArrayValue(ArrayValue { values: lines })),
        };
        profile_attrs.push(im.dict.attribute_kv(keys::COMMENT, v, ""));
    }
    for (key, idx) in [
        (keys::DROP_FRAMES, p.drop_frames),
        (keys::KEEP_FRAMES, p.keep_frames),
        (keys::DOC_URL, p.doc_url),
    ] {
        let s = im.str_at(idx)?;
        if !s.is_empty() {
            let v = AnyValue {
                value: Some(Value::StringValue(s.to_owned())),
            };
            profile_attrs.push(im.dict.attribute_kv(key, v, ""));
        }
    }
    let period_type = match p.period_type {
        Some(pt) => Some(ValueType {
            type_strindex: im.string(pt.r#type)?,
            unit_strindex: im.string(pt.unit)?,
        }),
        None => None,
    };
    let mut profiles = Vec::with_capacity(p.sample_type.len());
    for st in &p.sample_type {
        profiles.push(Profile {
            sample_type: Some(ValueType {
                type_strindex: im.string(st.r#type)?,
                unit_strindex: im.string(st.unit)?,
            }),
            samples: Vec::with_capacity(p.sample.len()),
            time_unix_nano: p.time_nanos.max(0) as u64,
            duration_nano: p.duration_nanos.max(0) as u64,
            period_type,
            period: p.period,
            attribute_indices: profile_attrs.clone(),
            ..Default::default()
        });
    }

    let mut stack = Vec::new();
    for s in &p.sample {
        if s.value.len() != p.sample_type.len() {
            return Err(invalid(format!(
                "a sample has {} values for {} sample types",
                s.value.len(),
                p.sample_type.len()
            )));
        }
        stack.clear();
        for &id in &s.location_id {
            stack.push(im.location(id)?);
        }
        let stack_index = im.dict.stack(&stack);
        let (attrs, link_index) = im.sample_labels(&s.label)?;
        for (profile, &v) in profiles.iter_mut().zip(&s.value) {
            profile.samples.push(Sample {
                stack_index,
                attribute_indices: attrs.clone(),
                link_index,
                values: vec![v],
                timestamps_unix_nano: Vec::new(),
            });
        }
    }

    if let (locations @ 1.., first) = im.unknown_mappings {
        tracing::warn!(
            locations,
            mapping_id = first,
            "pprof locations name a mapping id the profile does not have; read as no mapping"
        );
    }

    let mut scope_attrs = Vec::new();
    let default_type = im.str_at(p.default_sample_type)?;
    if !default_type.is_empty() {
        scope_attrs.push(KeyValue {
            key: keys::DEFAULT_SAMPLE_TYPE.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(default_type.to_owned())),
            }),
            ..Default::default()
        });
    }
    if p.sample_type.len() > 1 {
        // Profiles are in the original order: profile i had index i.
        let order = (0..p.sample_type.len() as i64)
            .map(|i| AnyValue {
                value: Some(Value::IntValue(i)),
            })
            .collect();
        scope_attrs.push(KeyValue {
            key: keys::SAMPLE_TYPE_ORDER.into(),
            value: Some(AnyValue {
                value: Some(Value::ArrayValue(ArrayValue { values: order })),
            }),
            ..Default::default()
        });
    }
    Ok(ScopeProfiles {
        scope: (!scope_attrs.is_empty()).then(|| InstrumentationScope {
            attributes: scope_attrs,
            ..Default::default()
        }),
        profiles,
        schema_url: String::new(),
    })
}

/// One pprof profile as OTLP `ProfilesData` with its own dictionary; the
/// resource is left for the receiver to describe.
pub fn pprof_to_otlp(p: &proto::Profile) -> Result<ProfilesData, PprofError> {
    let mut dict = DictionaryBuilder::new();
    let scope = import_pprof(p, &mut dict)?;
    Ok(ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: None,
            scope_profiles: vec![scope],
            schema_url: String::new(),
        }],
        dictionary: Some(dict.finish()),
    })
}
