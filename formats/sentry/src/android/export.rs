//! OTLP -> Android `profile_chunk`s, for profiles whose source was Android
//! (`sentry.platform` = `android`): Relay reads an `android` chunk only as
//! a method trace, so the points go back as spans of a trace (see
//! [`super::trace`]), one chunk per window of at most 30 s.
//!
//! Accounting as for v2 chunks: a span is a Sentry sample, and an OTLP
//! Sample counts as sent with the chunk that holds its first point.

use std::collections::HashMap;

use android_trace_log::chrono::DateTime;
use android_trace_log::{Method, Thread};

use super::receive::PLATFORM;
use super::trace::{self, Span, Spans, TraceInfo};
use crate::keys as k;
use crate::otlp_builder::DEFAULT_PERIOD_NS;
use crate::time::unix_nanos_to_secs;
use crate::v2::from_otlp::{chunk_id, time_unit_ns, ChunkResult, Dropped};
use crate::v2::outgoing::{AndroidTrace, ChunkProfile, ClientSdk, DebugMeta, ProfileChunk};
use crate::Reason;
use profcol_model::dictionary::Lookup;
use profcol_model::proto::{any_value::Value, Profile};

/// The `version` of an Android method-trace chunk.
pub const ANDROID_TRACE_VERSION: &str = "2.android-trace";

/// Longest trace of one chunk: Relay's limit for legacy profiles, which
/// older Relays also apply to Android chunks.
pub const MAX_WINDOW_NS: u64 = 30_000_000_000;

/// What the chunks of one profile share, as the v2 export works it out.
pub struct ChunkMeta {
    pub profiler_id: String,
    /// The OTLP profile id: the first chunk's id, later ones derived.
    pub profile_id: Option<[u8; 16]>,
    pub release: Option<String>,
    pub environment: Option<String>,
    pub client_sdk: ClientSdk,
    pub debug_meta: Option<DebugMeta>,
    /// `process.pid` of the resource.
    pub pid: Option<u32>,
}

/// One point: a span of one OTLP sample.
#[derive(Clone, Copy)]
struct Point {
    start: u64,
    ns: u64,
    thread: u16,
    stack: u32,
    home: bool,
    /// The rest of a span cut at a window's end: not a sample of its own.
    carried: bool,
}

/// Converts one profile whose `sentry.platform` is `android`.
pub fn export(dict: Lookup<'_>, profile: &Profile, meta: &ChunkMeta, out: &mut Vec<ChunkResult>) {
    let mut conv = Convert::new(dict);
    let (mut points, dropped) = conv.points(profile);
    if !dropped.is_empty() {
        out.push(ChunkResult::refused(dropped));
    }
    if points.is_empty() {
        return;
    }
    points.sort_by_key(|p| (p.start, p.thread));
    let pa = &profile.attribute_indices;
    let build_id = dict
        .attribute_str(pa, k::SENTRY_BUILD_ID)
        .map(str::to_owned);
    // Measurements of an Android chunk have the v2 shape; a legacy
    // profile's count from its start, which chunks do not take.
    let from_chunk = dict.attribute_str(pa, k::SENTRY_CHUNK_ID).is_some();
    let measurements = dict
        .attribute_str(pa, k::SENTRY_MEASUREMENTS)
        .filter(|_| from_chunk)
        .and_then(|m| serde_json::value::RawValue::from_string(m.to_owned()).ok());
    let js_profile = dict
        .attribute_str(pa, k::SENTRY_JS_PROFILE)
        .and_then(|m| serde_json::value::RawValue::from_string(m.to_owned()).ok());

    let mut i = 0;
    let mut made = 0u64;
    // A span running past its window's end goes on in the next one.
    let mut carried: Vec<Point> = Vec::new();
    while i < points.len() || !carried.is_empty() {
        let start = match (carried.first(), points.get(i)) {
            (Some(c), _) => c.start,
            (None, Some(p)) => p.start,
            (None, None) => break,
        };
        let end = start.saturating_add(MAX_WINDOW_NS);
        let j = i + points[i..].partition_point(|p| p.start < end);
        let mut window: Vec<Point> = std::mem::take(&mut carried);
        window.extend_from_slice(&points[i..j]);
        i = j;
        for p in &mut window {
            let stop = p.start.saturating_add(p.ns);
            if stop > end {
                carried.push(Point {
                    start: end,
                    ns: stop - end,
                    home: false,
                    carried: true,
                    ..*p
                });
                p.ns = end - p.start;
            }
        }
        let chunk_id = chunk_id(meta.profile_id, made);
        made += 1;
        let spans = conv.spans(&window, start);
        let sentry_samples = window.iter().filter(|p| !p.carried).count();
        let homes = window.iter().filter(|p| p.home).count() as u64;
        let log = trace::to_trace(
            TraceInfo {
                start: DateTime::from_timestamp_nanos(start as i64),
                pid: meta.pid,
                threads: conv.threads_of(&spans),
                methods: conv.methods_of(&spans),
            },
            &spans,
        );
        let duration_ns = u64::try_from(log.elapsed_time.as_nanos()).unwrap_or(u64::MAX);
        let chunk = ProfileChunk {
            chunk_id,
            profiler_id: meta.profiler_id.clone(),
            debug_meta: meta.debug_meta.clone(),
            environment: meta.environment.clone(),
            platform: PLATFORM.to_owned(),
            // Relay's Android chunk requires a release.
            release: Some(meta.release.clone().unwrap_or_default()),
            client_sdk: meta.client_sdk.clone(),
            // Newer Relays refuse an Android chunk without a version, and
            // read `2.android-trace` (or `2`) with a trace as one.
            version: ANDROID_TRACE_VERSION,
            measurements: measurements.clone(),
            profile: ChunkProfile::default(),
            android: Some(AndroidTrace {
                sampled_profile: trace::encode(&log),
                duration_ns,
                timestamp: unix_nanos_to_secs(start),
                build_id: build_id.clone(),
                js_profile: js_profile.clone(),
            }),
        };
        out.push(ChunkResult {
            payload: chunk.to_json(),
            chunk: Some(chunk),
            sentry_samples: sentry_samples as u64,
            otlp_samples: homes,
            dropped: Vec::new(),
        });
    }
}

/// A method as the trace names it.
#[derive(Clone, PartialEq, Eq, Hash)]
struct MethodKey {
    class_name: String,
    name: String,
    signature: String,
    source_file: String,
    line: Option<u32>,
}

struct Convert<'d> {
    dict: Lookup<'d>,
    /// OTLP stack index -> stack of method ids, outermost first.
    stacks: HashMap<i32, u32>,
    stack_methods: Vec<Vec<u32>>,
    methods: HashMap<MethodKey, u32>,
    method_keys: Vec<MethodKey>,
    /// Per OTLP location: its methods, outermost first.
    locations: HashMap<i32, Vec<u32>>,
    /// (thread.id, thread.name) attribute indices -> trace thread id.
    threads: HashMap<(i32, i32), u16>,
    thread_names: HashMap<u16, String>,
}

impl<'d> Convert<'d> {
    fn new(dict: Lookup<'d>) -> Self {
        Self {
            dict,
            stacks: HashMap::new(),
            stack_methods: Vec::new(),
            methods: HashMap::new(),
            method_keys: Vec::new(),
            locations: HashMap::new(),
            threads: HashMap::new(),
            thread_names: HashMap::new(),
        }
    }

    /// Every point of the profile, and the samples that are none: an
    /// aggregated sample (values without timestamps) has no place in time.
    fn points(&mut self, p: &Profile) -> (Vec<Point>, Vec<Dropped>) {
        let unit_ns = p
            .sample_type
            .map(|t| self.dict.string(t.unit_strindex))
            .and_then(time_unit_ns);
        let period_ns = p
            .period_type
            .map(|t| self.dict.string(t.unit_strindex))
            .and_then(time_unit_ns)
            .and_then(|f| u64::try_from(p.period).ok().map(|v| v.saturating_mul(f)))
            .filter(|&v| v > 0)
            .unwrap_or(DEFAULT_PERIOD_NS);
        let mut points = Vec::new();
        let mut untimed = 0u64;
        for s in &p.samples {
            if s.timestamps_unix_nano.is_empty() {
                untimed += 1;
                continue;
            }
            let stack = self.stack(s.stack_index);
            let thread = self.thread(&s.attribute_indices);
            // Values in time units are the span; others (counts) say one
            // sampling period each.
            let timed = unit_ns.filter(|_| s.values.len() == s.timestamps_unix_nano.len());
            for (j, &ts) in s.timestamps_unix_nano.iter().enumerate() {
                let ns = match timed {
                    Some(f) => u64::try_from(s.values[j]).unwrap_or(0).saturating_mul(f),
                    None => period_ns,
                };
                points.push(Point {
                    start: ts,
                    ns,
                    thread,
                    stack,
                    home: j == 0,
                    carried: false,
                });
            }
        }
        let dropped = if untimed > 0 {
            vec![Dropped {
                reason: Reason::UnsupportedSampleType,
                sentry_samples: 0,
                otlp_samples: untimed,
            }]
        } else {
            Vec::new()
        };
        (points, dropped)
    }

    fn stack(&mut self, i: i32) -> u32 {
        if let Some(&s) = self.stacks.get(&i) {
            return s;
        }
        let mut methods = Vec::new();
        // OTLP stacks are leaf first; within a location, the last line is
        // the caller the others were inlined into.
        for &l in self.dict.stack(i).location_indices.iter().rev() {
            methods.extend_from_slice(self.location(l));
        }
        let s = self.stack_methods.len() as u32;
        self.stack_methods.push(methods);
        self.stacks.insert(i, s);
        s
    }

    fn location(&mut self, l: i32) -> &[u32] {
        if !self.locations.contains_key(&l) {
            let loc = self.dict.location(l);
            let mut ids = Vec::with_capacity(loc.lines.len().max(1));
            if loc.lines.is_empty() {
                ids.push(self.method(MethodKey {
                    class_name: String::new(),
                    name: format!("{:#x}", loc.address),
                    signature: String::new(),
                    source_file: String::new(),
                    line: None,
                }));
            }
            for line in loc.lines.iter().rev() {
                let f = self.dict.function(line.function_index);
                let mut key = method_key(
                    self.dict.string(f.name_strindex),
                    self.dict.string(f.system_name_strindex),
                );
                key.source_file = self.dict.string(f.filename_strindex).to_owned();
                key.line = u32::try_from(line.line).ok().filter(|&l| l > 0);
                ids.push(self.method(key));
            }
            self.locations.insert(l, ids);
        }
        &self.locations[&l]
    }

    fn method(&mut self, key: MethodKey) -> u32 {
        if let Some(&id) = self.methods.get(&key) {
            return id;
        }
        let id = self.method_keys.len() as u32 + 1;
        self.method_keys.push(key.clone());
        self.methods.insert(key, id);
        id
    }

    /// The trace thread of a sample: its `thread.id` where that fits the
    /// format's 16 bits and is not taken, else the next free id.
    fn thread(&mut self, attrs: &[i32]) -> u16 {
        let (mut id_attr, mut name_attr) = (-1, -1);
        for &a in attrs {
            match self.dict.string(self.dict.attribute(a).key_strindex) {
                k::THREAD_ID => id_attr = a,
                k::THREAD_NAME => name_attr = a,
                _ => {}
            }
        }
        if let Some(&t) = self.threads.get(&(id_attr, name_attr)) {
            return t;
        }
        let value = |a: i32| {
            (a >= 0)
                .then(|| self.dict.attribute(a).value.as_ref())
                .flatten()
        };
        let wanted = match value(id_attr).and_then(|v| v.value.as_ref()) {
            Some(Value::IntValue(i)) => u16::try_from(*i).ok(),
            Some(Value::StringValue(s)) => s.parse().ok(),
            _ => None,
        };
        let name = value(name_attr)
            .and_then(|v| self.dict.str_value(v))
            .unwrap_or("")
            .to_owned();
        let t = match wanted.filter(|t| !self.thread_names.contains_key(t)) {
            Some(t) => t,
            None => (1..=u16::MAX)
                .rev()
                .find(|t| !self.thread_names.contains_key(t))
                .unwrap_or(0),
        };
        self.thread_names.insert(t, name);
        self.threads.insert((id_attr, name_attr), t);
        t
    }

    /// The window's points as spans from `start`, their stacks numbered
    /// afresh.
    fn spans(&self, window: &[Point], start: u64) -> Spans {
        let mut out = Spans::default();
        let mut ids: HashMap<u32, u32> = HashMap::new();
        for p in window {
            let stack = *ids.entry(p.stack).or_insert_with(|| {
                out.stacks
                    .push(self.stack_methods[p.stack as usize].clone());
                (out.stacks.len() - 1) as u32
            });
            out.spans.push(Span {
                thread: p.thread,
                start_ns: p.start - start,
                duration_ns: p.ns,
                stack,
            });
        }
        out
    }

    fn threads_of(&self, spans: &Spans) -> Vec<Thread> {
        let mut ids: Vec<u16> = spans.spans.iter().map(|s| s.thread).collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .map(|id| Thread {
                id,
                name: self.thread_names.get(&id).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The methods the spans' stacks name.
    fn methods_of(&self, spans: &Spans) -> Vec<Method> {
        let mut used: Vec<u32> = spans.stacks.iter().flatten().copied().collect();
        used.sort_unstable();
        used.dedup();
        used.into_iter()
            .map(|id| {
                let m = &self.method_keys[id as usize - 1];
                Method {
                    id,
                    name: m.name.clone(),
                    class_name: m.class_name.clone(),
                    signature: m.signature.clone(),
                    source_file: m.source_file.clone(),
                    source_line: m.line,
                }
            })
            .collect()
    }
}

/// Class, method and signature from an OTLP function: the receiver writes
/// `class.method` as the name and `class.method(signature)` as the system
/// name; other producers' names split at their last dot.
fn method_key(name: &str, system_name: &str) -> MethodKey {
    let (head, signature) = match system_name.find('(') {
        Some(i) if system_name[..i].ends_with(name) || name.is_empty() => system_name.split_at(i),
        _ => (name, ""),
    };
    let (class_name, method) = head.rsplit_once('.').unwrap_or(("", head));
    MethodKey {
        class_name: class_name.to_owned(),
        name: method.to_owned(),
        signature: signature.to_owned(),
        source_file: String::new(),
        line: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_split_back_into_class_method_and_signature() {
        let m = method_key(
            "com.example.App.onCreate",
            "com.example.App.onCreate(Landroid/os/Bundle;)V",
        );
        assert_eq!(m.class_name, "com.example.App");
        assert_eq!(m.name, "onCreate");
        assert_eq!(m.signature, "(Landroid/os/Bundle;)V");
        let m = method_key("java.lang.Thread.run", "");
        assert_eq!(
            (m.class_name.as_str(), m.name.as_str()),
            ("java.lang.Thread", "run")
        );
        assert_eq!(m.signature, "");
        let m = method_key("main", "main");
        assert_eq!((m.class_name.as_str(), m.name.as_str()), ("", "main"));
    }
}
