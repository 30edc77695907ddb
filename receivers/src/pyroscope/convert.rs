//! One request's profiles into one OTLP `ProfilesData`: each series (the
//! labels of `name`, or of a Push series) becomes a resource, each payload
//! (a pprof, a folded body) a scope of it, all sharing one dictionary.
//! pprof goes through the existing import; the labels that name threads and
//! processes are renamed to their conventions afterwards. Memory is
//! reserved in the collector's budget before each step takes it.

use std::io::Read;

use flate2::read::MultiGzDecoder;

use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::memory::Reservation;
use profcol_model::proto::{
    any_value::Value, AnyValue, InstrumentationScope, Profile, ProfilesData, ProfilesDictionary,
    Resource, ResourceProfiles, ScopeProfiles,
};
use profcol_pipeline::component::ConsumeError;
use profcol_pprof::{decode_pprof_limited, import_pprof};

use super::folded::{self, Shape, Text};
use super::labels::{Described, SAMPLE_LABELS};
use crate::ingest::Refusal;

/// Profile attribute: Pyroscope's legacy aggregation of a sample type
/// (`average` for gauges such as in-use memory or goroutines; `sum`, the
/// default, is not written).
pub const AGGREGATION: &str = "pyroscope.aggregation";
/// Profile attribute: the name Pyroscope shows for a sample type when it
/// differs from it (`block_count` for Go's `contentions` of a block
/// profile, which are otherwise the same as a mutex profile's).
pub const DISPLAY_NAME: &str = "pyroscope.display_name";

/// What the query or a `sample_type_config` part says about sample types.
#[derive(Debug, Default, Clone)]
pub struct SampleTypes {
    /// `sample_type_config`: per pprof sample type name.
    pub config: serde_json::Map<String, serde_json::Value>,
    /// `aggregationType` of the query, for types the config does not name.
    pub aggregation: String,
}

impl SampleTypes {
    /// The `sample_type_config` part: a JSON object keyed by sample type.
    pub fn with_config(mut self, json: &[u8]) -> Result<Self, String> {
        let v: serde_json::Value = serde_json::from_slice(json)
            .map_err(|e| format!("sample_type_config is not JSON: {e}"))?;
        match v {
            serde_json::Value::Object(m) => self.config = m,
            _ => return Err("sample_type_config is not a JSON object".into()),
        }
        Ok(self)
    }

    fn attributes_of(&self, sample_type: &str) -> Vec<(&'static str, String)> {
        let entry = self.config.get(sample_type);
        let field = |k: &str| entry.and_then(|e| e.get(k)).and_then(|v| v.as_str());
        let mut out = Vec::new();
        let aggregation = field("aggregation").unwrap_or(&self.aggregation);
        if aggregation == "average" {
            out.push((AGGREGATION, aggregation.to_owned()));
        }
        if let Some(d) = field("display-name").filter(|d| !d.is_empty() && *d != sample_type) {
            out.push((DISPLAY_NAME, d.to_owned()));
        }
        out
    }
}

/// The time a payload falls back to when it carries none of its own.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub from: u64,
    pub until: u64,
}

/// What the query says about a JFR upload.
#[derive(Debug, Clone, Copy)]
pub struct JfrUpload {
    /// `sampleRate`: a CPU or wall sample is worth `1e9 / rate` ns.
    pub sample_rate: u32,
    pub window: Window,
}

/// Memory taken while converting, and the limit on what a gzip'd pprof
/// may inflate to.
pub struct Work {
    pub memory: Reservation,
    pub limit: usize,
}

impl Work {
    /// Grows the reservation by `more` bytes, or refuses: retry later when
    /// the budget is full now, 413 when it could never hold the request.
    pub fn reserve(&mut self, more: usize) -> Result<(), Refusal> {
        let total = self.memory.bytes().saturating_add(more);
        self.memory
            .try_grow_to(total)
            .map_err(|e| Refusal::from(ConsumeError::memory(e)))
    }
}

/// Profiles of one request, in the making.
#[derive(Default)]
pub struct Converter {
    dict: DictionaryBuilder,
    resources: Vec<ResourceProfiles>,
}

/// Before 1971, a pprof time is a client's placeholder (pyroscope-rs
/// sends 0): the request's window is used instead, as Pyroscope does.
const PLAUSIBLE_SINCE: u64 = 365 * 86_400 * 1_000_000_000;

impl Converter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A pprof (gzip'd or not) of the series `d`.
    pub fn pprof(
        &mut self,
        bytes: &[u8],
        d: &Described,
        types: &SampleTypes,
        window: Window,
        work: &mut Work,
    ) -> Result<(), Refusal> {
        let raw = inflate(bytes, work, "pprof")?;
        work.reserve(pprof_estimate(&raw))?;
        let p = decode_pprof_limited(&raw, work.limit)
            .map_err(|e| Refusal::invalid("malformed", e.to_string()))?;
        drop(raw);
        let mut scope = import_pprof(&p, &mut self.dict)
            .map_err(|e| Refusal::invalid("malformed", e.to_string()))?;
        // One profile per sample type, in their order.
        let type_names: Vec<String> = p
            .sample_type
            .iter()
            .map(|t| {
                usize::try_from(t.r#type)
                    .ok()
                    .and_then(|i| p.string_table.get(i))
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        drop(p);
        let extra = self.sample_attributes(d);
        for (profile, type_name) in scope.profiles.iter_mut().zip(&type_names) {
            if profile.time_unix_nano < PLAUSIBLE_SINCE {
                profile.time_unix_nano = window.from;
                profile.duration_nano = window.until.saturating_sub(window.from);
            }
            self.profile_attributes(profile, &types.attributes_of(type_name));
            add_sample_attributes(profile, &extra);
        }
        self.add(d, scope);
        Ok(())
    }

    /// A folded or lines body of the series `d`.
    pub fn text(
        &mut self,
        body: &[u8],
        text: Text,
        shape: &Shape,
        d: &Described,
        types: &SampleTypes,
        work: &mut Work,
    ) -> Result<(), Refusal> {
        work.reserve(folded::estimate(body))?;
        let extra = self.sample_attributes(d);
        let mut profile = folded::parse(body, text, shape, &mut self.dict, &extra)
            .map_err(|e| Refusal::invalid("malformed", e))?;
        self.profile_attributes(&mut profile, &types.attributes_of(&shape.sample_type.0));
        self.add(
            d,
            ScopeProfiles {
                profiles: vec![profile],
                ..Default::default()
            },
        );
        Ok(())
    }

    /// A JFR of the Java agent (gzip'd or not) and its `labels` part (a
    /// `LabelsSnapshot`, gzip'd or not) of the series `d`: one profile per
    /// sample type, as Pyroscope converts it.
    pub fn jfr(
        &mut self,
        jfr: &[u8],
        labels: Option<&[u8]>,
        d: &Described,
        upload: &JfrUpload,
        work: &mut Work,
    ) -> Result<(), Refusal> {
        let bad = |m: String| Refusal::invalid("malformed", m);
        let raw = inflate(jfr, work, "jfr")?;
        if !profcol_jfr::is_jfr(&raw) {
            return Err(bad(
                "the jfr body is not a JFR recording (no FLR magic)".into()
            ));
        }
        let snapshot = match labels {
            Some(l) => {
                let l = inflate(l, work, "labels")?;
                work.reserve(l.len() * 4)?;
                Some(
                    profcol_jfr::LabelsSnapshot::decode_bytes(&l)
                        .map_err(|e| bad(e.to_string()))?,
                )
            }
            None => None,
        };
        work.reserve(profcol_jfr::estimate(&raw))?;
        let opts = profcol_jfr::Options {
            sample_rate: upload.sample_rate,
            time_unix_nano: upload.window.from,
            duration_nano: upload.window.until.saturating_sub(upload.window.from),
        };
        let extra = self.sample_attributes(d);
        let mut c = profcol_jfr::Converter::new(&mut self.dict, snapshot.as_ref(), opts);
        c.add(&raw).map_err(|e| bad(format!("jfr: {e}")))?;
        let s = c.stats;
        // Events of other types (GC, flags, ...) are read past, not lost.
        tracing::debug!(
            chunks = s.chunks,
            converted = s.converted,
            skipped = s.skipped,
            other = s.other,
            "JFR converted"
        );
        let profiles = c.finish(&extra);
        self.add(
            d,
            ScopeProfiles {
                profiles,
                ..Default::default()
            },
        );
        Ok(())
    }

    fn sample_attributes(&mut self, d: &Described) -> Vec<i32> {
        d.sample
            .iter()
            .map(|(k, v)| self.dict.attribute_kv(k, v.clone(), ""))
            .collect()
    }

    fn profile_attributes(&mut self, profile: &mut Profile, attrs: &[(&'static str, String)]) {
        for (k, v) in attrs {
            let value = AnyValue {
                value: Some(Value::StringValue(v.clone())),
            };
            profile
                .attribute_indices
                .push(self.dict.attribute_kv(k, value, ""));
        }
    }

    /// Under the resource of `d`'s attributes, shared with an earlier
    /// series that has the same ones (Python's memory and CPU series).
    fn add(&mut self, d: &Described, mut scope: ScopeProfiles) {
        if !d.scope_name.is_empty() || !d.scope_version.is_empty() {
            let s = scope
                .scope
                .get_or_insert_with(InstrumentationScope::default);
            s.name.clone_from(&d.scope_name);
            s.version.clone_from(&d.scope_version);
        }
        let same = self.resources.iter_mut().find(|r| {
            r.resource
                .as_ref()
                .is_some_and(|res| res.attributes == d.resource)
        });
        match same {
            Some(r) => r.scope_profiles.push(scope),
            None => self.resources.push(ResourceProfiles {
                resource: Some(Resource {
                    attributes: d.resource.clone(),
                    ..Default::default()
                }),
                scope_profiles: vec![scope],
                schema_url: String::new(),
            }),
        }
    }

    /// The request's profiles; `None` when none has a sample (an empty
    /// mutex profile, say: Pyroscope accepts it and stores nothing).
    pub fn finish(mut self) -> Option<ProfilesData> {
        for r in &mut self.resources {
            for s in &mut r.scope_profiles {
                s.profiles.retain(|p| !p.samples.is_empty());
            }
            r.scope_profiles.retain(|s| !s.profiles.is_empty());
        }
        self.resources.retain(|r| !r.scope_profiles.is_empty());
        if self.resources.is_empty() {
            return None;
        }
        let mut dict = self.dict.finish();
        rename_sample_labels(&mut dict);
        Some(ProfilesData {
            resource_profiles: self.resources,
            dictionary: Some(dict),
        })
    }
}

fn add_sample_attributes(profile: &mut Profile, extra: &[i32]) {
    if extra.is_empty() {
        return;
    }
    for s in &mut profile.samples {
        s.attribute_indices.extend_from_slice(extra);
    }
}

/// pprof labels that name a thread or process (`thread_name`,
/// `thread_id`, `pid`) get their semantic-convention keys, and decimal ids
/// become integers; `profile_id` becomes `span_id`, still hex text.
fn rename_sample_labels(dict: &mut ProfilesDictionary) {
    for (from, to) in SAMPLE_LABELS {
        let Some(old) = dict.string_table.iter().position(|s| s == from) else {
            continue;
        };
        let new = match dict.string_table.iter().position(|s| s == to) {
            Some(i) => i,
            None => {
                dict.string_table.push(to.to_owned());
                dict.string_table.len() - 1
            }
        } as i32;
        for a in &mut dict.attribute_table {
            if a.key_strindex != old as i32 {
                continue;
            }
            a.key_strindex = new;
            if !matches!(to, "thread.id" | "process.pid") {
                continue;
            }
            if let Some(AnyValue { value: Some(v) }) = &mut a.value {
                let id = match v {
                    Value::StringValue(s) => s.parse::<i64>().ok(),
                    _ => None,
                };
                if let Some(n) = id {
                    *v = Value::IntValue(n);
                }
            }
        }
    }
}

/// The pprof's (or JFR's) bytes, inflated when gzip'd (no protobuf
/// message or JFR starts with the gzip magic), reserved in the budget as they grow and stopped
/// at the body limit.
fn inflate<'a>(
    bytes: &'a [u8],
    work: &mut Work,
    what: &str,
) -> Result<std::borrow::Cow<'a, [u8]>, Refusal> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes.into());
    }
    let mut out: Vec<u8> = Vec::new();
    let mut gz = MultiGzDecoder::new(bytes);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = gz.read(&mut chunk).map_err(|e| {
            Refusal::invalid("malformed", format!("the gzip'd {what} is corrupt: {e}"))
        })?;
        if n == 0 {
            return Ok(out.into());
        }
        if out.len() + n > work.limit {
            return Err(Refusal::too_large(format!(
                "the {what} exceeds the size limit of {} bytes once inflated",
                work.limit
            )));
        }
        if out.len() + n > out.capacity() {
            let want = (out.capacity() * 2).max(out.len() + n).min(work.limit);
            work.reserve(want - out.capacity())?;
            out.reserve_exact(want - out.len());
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

/// What decoding a plain pprof and importing it takes, read off its
/// top-level fields: its bytes ten times over (the decoded pprof and the
/// dictionary made of its strings, functions and locations) and, per
/// sample, prost's `Sample` and one OTLP sample per sample type.
pub fn pprof_estimate(raw: &[u8]) -> usize {
    use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
    let (mut samples, mut types) = (0usize, 0usize);
    let mut buf = raw;
    while !buf.is_empty() {
        let Ok((tag, wire)) = decode_key(&mut buf) else {
            break;
        };
        match (tag, wire) {
            (1 | 2, WireType::LengthDelimited) => {
                let Ok(len) = decode_varint(&mut buf) else {
                    break;
                };
                let len = (len as usize).min(buf.len());
                buf = &buf[len..];
                if tag == 1 {
                    types += 1;
                } else {
                    samples += 1;
                }
            }
            _ => {
                if skip_field(wire, tag, &mut buf, DecodeContext::default()).is_err() {
                    break;
                }
            }
        }
    }
    raw.len() * 10 + samples * (200 + 160 * types.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use profcol_model::memory::MemoryBudget;

    fn work() -> Work {
        Work {
            memory: MemoryBudget::new(1 << 30).try_admit(0).unwrap(),
            limit: 64 << 20,
        }
    }

    /// Thread and process ids become integers under their conventions;
    /// a `profile_id` (a span id in hex) becomes `span_id` as in Pyroscope,
    /// its text kept (leading zeros and all).
    #[test]
    fn sample_labels_get_their_conventions_and_profile_id_is_a_span_id() {
        let mut b = DictionaryBuilder::new();
        let s = |v: &str| AnyValue {
            value: Some(Value::StringValue(v.to_owned())),
        };
        b.attribute_kv("thread_id", s("42"), "");
        b.attribute_kv("profile_id", s("0000000000000123"), "");
        b.attribute_kv("thread_name", s("7"), "");
        let mut d = b.finish();
        rename_sample_labels(&mut d);
        let got: Vec<(String, Option<Value>)> = d
            .attribute_table
            .iter()
            .filter(|a| a.key_strindex != 0)
            .map(|a| {
                (
                    d.string_table[a.key_strindex as usize].clone(),
                    a.value.clone().and_then(|v| v.value),
                )
            })
            .collect();
        let text = |v: &str| Some(Value::StringValue(v.to_owned()));
        assert_eq!(
            got,
            [
                ("thread.id".to_owned(), Some(Value::IntValue(42))),
                ("span_id".to_owned(), text("0000000000000123")),
                ("thread.name".to_owned(), text("7")),
            ]
        );
    }

    /// What a pprof holds once converted, and its decoded pprof (at least
    /// its bytes again) while that is made, stay within what was reserved.
    #[test]
    fn the_estimate_covers_the_converted_pprof() {
        for rel in ["pprof/go-cpu.pb.gz", "pprof/dd-wall.pb.gz"] {
            let gz = profcol_model::testing::fixture(rel);
            let mut w = work();
            let raw = inflate(&gz, &mut w, "pprof").unwrap().into_owned();
            assert!(
                w.memory.bytes() >= raw.len(),
                "{rel}: inflating is reserved"
            );
            let mut c = Converter::new();
            c.pprof(
                &gz,
                &Described::default(),
                &SampleTypes::default(),
                Window { from: 0, until: 0 },
                &mut w,
            )
            .unwrap();
            let data = c.finish().unwrap();
            let held = profcol_model::footprint::heap_bytes(&data);
            let need = held + 2 * raw.len();
            assert!(
                pprof_estimate(&raw) >= need,
                "{rel}: {} < {need}",
                pprof_estimate(&raw)
            );
        }
    }

    #[test]
    fn a_bomb_stops_at_the_limit() {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut e, &vec![0u8; 8 << 20]).unwrap();
        let bomb = e.finish().unwrap();
        let mut w = Work {
            limit: 1 << 20,
            ..work()
        };
        let r = inflate(&bomb, &mut w, "pprof").unwrap_err();
        assert_eq!(r.reason, "too_large");
        assert!(w.memory.bytes() <= 1 << 20);
    }
}
