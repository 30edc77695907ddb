//! Java Flight Recorder files (JDK 11+ and async-profiler's, as the
//! Pyroscope Java agent uploads them) into OTLP profiles, as Pyroscope
//! converts them: CPU, wall, allocation, lock and park samples, one
//! profile per sample type, frames named `class.method` with their line.
//!
//! Written here rather than on the `jfrs` crate: `jfrs` 0.2 allocates what
//! a file claims (`Vec::with_capacity` of a count read from it, so one
//! negative or huge count aborts the process), decodes every value of
//! every event into a tree of `Rc`s (not `Send`, an allocation per field)
//! and follows the pools' chain of offsets, which a crafted file can make
//! loop. This reader checks every count against the bytes left, decodes
//! only the pools a profile needs, walks events by their sizes, and
//! allocates per stack trace and per method, never per event.

mod chunk;
pub mod generated;
pub mod labels;
pub mod metadata;
pub mod reader;

use ahash::HashMap;

use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{
    any_value::Value, AnyValue, Line, Location, Profile, Sample, ValueType,
};

use chunk::{Chunk, Header, HEADER_SIZE};
pub use labels::LabelsSnapshot;
use reader::{Reader, Str};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(String);

impl Error {
    pub fn new(m: impl Into<String>) -> Self {
        Error(m.into())
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Whether `b` starts like a JFR file.
pub fn is_jfr(b: &[u8]) -> bool {
    b.starts_with(chunk::MAGIC)
}

/// What the upload says about the recording.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Samples per second of CPU and wall events (`sampleRate`): each is
    /// worth `1e9 / rate` nanoseconds.
    pub sample_rate: u32,
    pub time_unix_nano: u64,
    pub duration_nano: u64,
}

/// The sample types an event becomes, as Pyroscope's `jfr-parser` names
/// them: `(sample types, period type)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SampleKind {
    Cpu,
    Wall,
    AllocInNewTlab,
    AllocOutsideTlab,
    Lock,
    ThreadPark,
    Live,
    AllocSample,
    Malloc,
}

type Shape = (
    &'static [(&'static str, &'static str)],
    Option<(&'static str, &'static str)>,
);

impl SampleKind {
    pub fn shape(self) -> Shape {
        match self {
            Self::Cpu => (&[("cpu", "nanoseconds")], Some(("cpu", "nanoseconds"))),
            Self::Wall => (&[("wall", "nanoseconds")], Some(("wall", "nanoseconds"))),
            Self::AllocInNewTlab => (
                &[
                    ("alloc_in_new_tlab_objects", "count"),
                    ("alloc_in_new_tlab_bytes", "bytes"),
                ],
                Some(("space", "bytes")),
            ),
            Self::AllocOutsideTlab => (
                &[
                    ("alloc_outside_tlab_objects", "count"),
                    ("alloc_outside_tlab_bytes", "bytes"),
                ],
                Some(("space", "bytes")),
            ),
            Self::Lock => (
                &[("contentions", "count"), ("delay", "nanoseconds")],
                Some(("mutex", "count")),
            ),
            Self::ThreadPark => (
                &[("contentions", "count"), ("delay", "nanoseconds")],
                Some(("block", "count")),
            ),
            Self::Live => (&[("live", "count")], Some(("objects", "count"))),
            Self::AllocSample => (
                &[
                    ("alloc_sample_objects", "count"),
                    ("alloc_sample_bytes", "bytes"),
                ],
                Some(("space", "bytes")),
            ),
            Self::Malloc => (
                &[("malloc_objects", "count"), ("malloc_bytes", "bytes")],
                None,
            ),
        }
    }
}

/// The event types converted, and the field holding their second value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventKind {
    Execution,
    WallClock,
    InNewTlab,
    OutsideTlab,
    AllocSample,
    MonitorEnter,
    ThreadPark,
    LiveObject,
    Malloc,
    ActiveSetting,
}

impl EventKind {
    fn of(class: &str) -> Option<(Self, &'static str)> {
        Some(match class {
            "jdk.ExecutionSample" => (Self::Execution, ""),
            "profiler.WallClockSample" => (Self::WallClock, "samples"),
            "jdk.ObjectAllocationInNewTLAB" => (Self::InNewTlab, "tlabSize"),
            "jdk.ObjectAllocationOutsideTLAB" => (Self::OutsideTlab, "allocationSize"),
            "jdk.ObjectAllocationSample" => (Self::AllocSample, "weight"),
            "jdk.JavaMonitorEnter" => (Self::MonitorEnter, "duration"),
            "jdk.ThreadPark" => (Self::ThreadPark, "duration"),
            "profiler.LiveObject" => (Self::LiveObject, ""),
            "profiler.Malloc" => (Self::Malloc, "size"),
            "jdk.ActiveSetting" => (Self::ActiveSetting, ""),
            _ => return None,
        })
    }
}

/// What a field of a converted event is read for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Skip,
    Stack,
    State,
    Context,
    /// The Pyroscope async-profiler's span fields, which
    /// otel-profiling-java sets (`setTracingContext`).
    SpanId,
    SpanName,
    Value,
    /// `ActiveSetting`'s name and value.
    Name,
    Setting,
}

/// What was read and what was left out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub chunks: u64,
    /// Events that became (part of) a sample.
    pub converted: u64,
    /// Events of the converted types left out as Pyroscope leaves them
    /// (a sleeping thread's CPU sample, a stack trace not in the pools).
    pub skipped: u64,
    /// Events of other types (GC, flags, system ...), not converted.
    pub other: u64,
}

/// What an event's sample is labelled by, as in Pyroscope's
/// `StacktraceCorrelation`: the labels' context, the span's id and the
/// id of its name in the labels' strings (0 when unset).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
struct Correlation {
    context: i64,
    span_id: i64,
    span_name: i64,
}

/// One sample in the making: its stack and correlation, and its values.
struct Acc {
    stack: i32,
    correlation: Correlation,
    values: [i64; 2],
}

/// The samples of one kind, and where each (stack, correlation) is.
type Samples = (Vec<Acc>, HashMap<(i32, Correlation), usize>);

/// The profiles of one JFR upload, built into a shared dictionary.
pub struct Converter<'d> {
    dict: &'d mut DictionaryBuilder,
    labels: Option<&'d LabelsSnapshot>,
    opts: Options,
    samples: HashMap<SampleKind, Samples>,
    /// Attribute indices of each correlation's labels.
    contexts: HashMap<Correlation, Vec<i32>>,
    /// Per chunk: stack trace id -> dictionary stack, method -> function.
    stacks: HashMap<i64, Option<i32>>,
    functions: HashMap<i64, i32>,
    locations: HashMap<(i32, i32), i32>,
    scratch: Vec<i32>,
    pub stats: Stats,
}

impl<'d> Converter<'d> {
    pub fn new(
        dict: &'d mut DictionaryBuilder,
        labels: Option<&'d LabelsSnapshot>,
        opts: Options,
    ) -> Self {
        Converter {
            dict,
            labels,
            opts,
            samples: HashMap::default(),
            contexts: HashMap::default(),
            stacks: HashMap::default(),
            functions: HashMap::default(),
            locations: HashMap::default(),
            scratch: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// Adds the events of every chunk of `jfr`.
    pub fn add(&mut self, jfr: &[u8]) -> Result<(), Error> {
        let mut at = 0;
        while at < jfr.len() {
            let chunk = Chunk::read(&jfr[at..]).map_err(|e| {
                Error::new(format!("chunk {} (at byte {at}): {e}", self.stats.chunks))
            })?;
            at += chunk.header.size;
            self.stats.chunks += 1;
            self.chunk(&chunk)
                .map_err(|e| Error::new(format!("chunk {}: {e}", self.stats.chunks - 1)))?;
        }
        if self.stats.chunks == 0 {
            return Err(Error::new("an empty JFR"));
        }
        Ok(())
    }

    fn chunk(&mut self, c: &Chunk<'_>) -> Result<(), Error> {
        self.stacks.clear();
        self.functions.clear();
        // The event kinds and field roles of this chunk's classes.
        let mut kinds: HashMap<i64, (EventKind, Vec<Role>)> = HashMap::default();
        for class in &c.types.classes {
            let Some((kind, value)) = EventKind::of(&class.name) else {
                continue;
            };
            let roles = class
                .fields
                .iter()
                .map(|f| match f.name.as_str() {
                    "stackTrace" if f.pool => Role::Stack,
                    "state" if f.pool => Role::State,
                    "contextId" => Role::Context,
                    "spanId" => Role::SpanId,
                    "spanName" => Role::SpanName,
                    "name" if kind == EventKind::ActiveSetting => Role::Name,
                    "value" if kind == EventKind::ActiveSetting => Role::Setting,
                    n if n == value => Role::Value,
                    _ => Role::Skip,
                })
                .collect();
            kinds.insert(class.id, (kind, roles));
        }
        // The profiler's `event` setting (cpu, itimer, wall) decides what
        // execution samples are; it may come after them.
        let mut wall_mode = false;
        for e in c.events() {
            let (ty, mut r) = e?;
            if let Some((EventKind::ActiveSetting, roles)) = kinds.get(&ty) {
                let (mut name, mut value) = (Str::Null, Str::Null);
                self.read_event(c, ty, roles, &mut r, |role, s| match role {
                    Role::Name => name = s,
                    Role::Setting => value = s,
                    _ => {}
                })?;
                if c.pools.text(&name) == "event" {
                    wall_mode = c.pools.text(&value) == "wall";
                }
            }
        }
        let ticks = c.header.ticks_per_second;
        for e in c.events() {
            let (ty, mut r) = e?;
            let Some((kind, roles)) = kinds.get(&ty) else {
                if ty > 1 {
                    self.stats.other += 1;
                }
                continue;
            };
            if *kind == EventKind::ActiveSetting {
                continue;
            }
            let mut ev = Ev::default();
            self.read_fields(c, ty, roles, &mut r, &mut ev)?;
            let state = c
                .pools
                .thread_states
                .get(&ev.state)
                .map(|s| c.pools.text(s));
            let mut any = false;
            let mut add = |me: &mut Self, k: SampleKind, v: [i64; 2]| -> Result<(), Error> {
                any |= me.sample(c, k, ev.stack, ev.correlation, v)?;
                Ok(())
            };
            match kind {
                EventKind::Execution => {
                    if state.is_some_and(|s| s != "STATE_SLEEPING") {
                        add(self, SampleKind::Cpu, [1, 0])?;
                    }
                    if wall_mode {
                        add(self, SampleKind::Wall, [1, 0])?;
                    }
                }
                EventKind::WallClock => {
                    if wall_mode && state == Some("STATE_RUNNABLE") {
                        add(self, SampleKind::Cpu, [ev.value, 0])?;
                    }
                    add(self, SampleKind::Wall, [ev.value, 0])?;
                }
                EventKind::InNewTlab => add(self, SampleKind::AllocInNewTlab, [1, ev.value])?,
                EventKind::OutsideTlab => add(self, SampleKind::AllocOutsideTlab, [1, ev.value])?,
                EventKind::AllocSample => add(self, SampleKind::AllocSample, [1, ev.value])?,
                EventKind::MonitorEnter => {
                    add(self, SampleKind::Lock, [1, nanos(ev.value, ticks)])?
                }
                EventKind::ThreadPark => {
                    add(self, SampleKind::ThreadPark, [1, nanos(ev.value, ticks)])?
                }
                EventKind::LiveObject => add(self, SampleKind::Live, [1, 0])?,
                EventKind::Malloc => add(self, SampleKind::Malloc, [1, ev.value])?,
                EventKind::ActiveSetting => {}
            }
            if any {
                self.stats.converted += 1;
            } else {
                self.stats.skipped += 1;
            }
        }
        Ok(())
    }

    fn read_fields(
        &self,
        c: &Chunk<'_>,
        ty: i64,
        roles: &[Role],
        r: &mut Reader<'_>,
        ev: &mut Ev,
    ) -> Result<(), Error> {
        let class = &c.types.classes[c.types.index(ty).unwrap_or_default()];
        for (f, role) in class.fields.iter().zip(roles) {
            let slot = match role {
                Role::Stack => &mut ev.stack,
                Role::State => &mut ev.state,
                Role::Context => &mut ev.correlation.context,
                Role::SpanId => &mut ev.correlation.span_id,
                Role::SpanName => &mut ev.correlation.span_name,
                Role::Value => &mut ev.value,
                _ => {
                    c.types.skip_field(r, f, 1)?;
                    continue;
                }
            };
            *slot = c.types.int_field(r, f)?.unwrap_or(0);
        }
        Ok(())
    }

    fn read_event(
        &self,
        c: &Chunk<'_>,
        ty: i64,
        roles: &[Role],
        r: &mut Reader<'_>,
        mut got: impl FnMut(Role, Str),
    ) -> Result<(), Error> {
        let class = &c.types.classes[c.types.index(ty).unwrap_or_default()];
        for (f, role) in class.fields.iter().zip(roles) {
            match role {
                Role::Name | Role::Setting => {
                    if let Some(s) = c.types.str_field(r, f)? {
                        got(*role, s);
                    }
                }
                _ => c.types.skip_field(r, f, 1)?,
            }
        }
        Ok(())
    }

    /// Adds `values` to the sample of (stack, correlation) of kind `k`;
    /// false when the stack trace is not in the pools.
    fn sample(
        &mut self,
        c: &Chunk<'_>,
        k: SampleKind,
        stack: i64,
        correlation: Correlation,
        values: [i64; 2],
    ) -> Result<bool, Error> {
        let Some(stack) = self.stack(c, stack) else {
            return Ok(false);
        };
        let (acc, index) = self.samples.entry(k).or_default();
        match index.get(&(stack, correlation)) {
            Some(&i) => {
                let a = &mut acc[i].values;
                a[0] = a[0].saturating_add(values[0]);
                a[1] = a[1].saturating_add(values[1]);
            }
            None => {
                index.insert((stack, correlation), acc.len());
                acc.push(Acc {
                    stack,
                    correlation,
                    values,
                });
            }
        }
        Ok(true)
    }

    /// The dictionary stack of a stack trace id, made once per chunk.
    fn stack(&mut self, c: &Chunk<'_>, id: i64) -> Option<i32> {
        if let Some(&s) = self.stacks.get(&id) {
            return s;
        }
        let made = c.pools.stacks.get(&id).map(|&(start, len)| {
            let mut locs = std::mem::take(&mut self.scratch);
            locs.clear();
            for f in &c.pools.frames[start as usize..(start + len) as usize] {
                let Some(func) = self.function(c, f.method) else {
                    continue;
                };
                let loc = *self.locations.entry((func, f.line)).or_insert_with(|| {
                    self.dict.location(Location {
                        lines: vec![Line {
                            function_index: func,
                            line: i64::from(f.line),
                            column: 0,
                        }],
                        ..Default::default()
                    })
                });
                locs.push(loc);
            }
            let s = self.dict.stack(&locs);
            self.scratch = locs;
            s
        });
        self.stacks.insert(id, made);
        made
    }

    /// `class.method` as Pyroscope names a Java frame (the class in its
    /// internal form, `java/lang/Thread`, generated names merged); a native
    /// frame's class is empty.
    fn function(&mut self, c: &Chunk<'_>, method: i64) -> Option<i32> {
        if let Some(&f) = self.functions.get(&method) {
            return Some(f);
        }
        let &(class, name) = c.pools.methods.get(&method)?;
        let class = c
            .pools
            .classes
            .get(&class)
            .map_or("", |&s| c.pools.symbol(s));
        let class = generated::merge(class);
        let name = generated::merge(c.pools.symbol(name));
        let name = name.as_ref();
        let full;
        let frame = if class.is_empty() {
            name
        } else {
            full = format!("{class}.{name}");
            &full
        };
        let f = self.dict.function_named(frame, frame, "", 0);
        self.functions.insert(method, f);
        Some(f)
    }

    /// The profiles: one per sample type, in [`SampleKind`] order;
    /// `extra` attributes go on every sample.
    pub fn finish(mut self, extra: &[i32]) -> Vec<Profile> {
        let mut kinds: Vec<SampleKind> = self.samples.keys().copied().collect();
        kinds.sort_unstable();
        let period = 1_000_000_000 / i64::from(self.opts.sample_rate.max(1));
        let mut out = Vec::new();
        for k in kinds {
            let (acc, _) = self.samples.remove(&k).unwrap_or_default();
            let (types, period_type) = k.shape();
            let timed = matches!(k, SampleKind::Cpu | SampleKind::Wall);
            for (vi, (t, u)) in types.iter().enumerate() {
                let mut samples = Vec::with_capacity(acc.len());
                for a in &acc {
                    let mut attrs = self.correlation_attributes(a.correlation);
                    attrs.extend_from_slice(extra);
                    let v = a.values[vi];
                    samples.push(Sample {
                        stack_index: a.stack,
                        values: vec![if timed { v.saturating_mul(period) } else { v }],
                        attribute_indices: attrs,
                        ..Default::default()
                    });
                }
                let vt = |d: &mut DictionaryBuilder, (t, u): (&str, &str)| ValueType {
                    type_strindex: d.string(t),
                    unit_strindex: d.string(u),
                };
                out.push(Profile {
                    sample_type: Some(vt(self.dict, (t, u))),
                    period_type: period_type.map(|p| vt(self.dict, p)),
                    period: if timed { period } else { 1 },
                    time_unix_nano: self.opts.time_unix_nano,
                    duration_nano: self.opts.duration_nano,
                    samples,
                    ..Default::default()
                });
            }
        }
        out
    }

    /// The labels of a context, then the span's as Pyroscope stores them:
    /// `span_id` (16 hex digits; jfr-parser writes `profile_id`, which
    /// Pyroscope's distributor renames) and `span_name` (from the labels'
    /// strings). Made once per correlation, not per sample.
    fn correlation_attributes(&mut self, c: Correlation) -> Vec<i32> {
        if let Some(a) = self.contexts.get(&c) {
            return a.clone();
        }
        let string = |v: String| AnyValue {
            value: Some(Value::StringValue(v)),
        };
        let mut attrs: Vec<i32> = match self.labels {
            Some(l) if c.context != 0 => l
                .context(c.context)
                .into_iter()
                .map(|(k, v)| self.dict.attribute_kv(k, string(v.to_owned()), ""))
                .collect(),
            _ => Vec::new(),
        };
        if c.span_id != 0 {
            let id = format!("{:016x}", c.span_id as u64);
            attrs.push(self.dict.attribute_kv(SPAN_ID, string(id), ""));
        }
        let name = self
            .labels
            .filter(|_| c.span_name != 0)
            .and_then(|l| l.strings.get(&c.span_name))
            .filter(|n| !n.is_empty());
        if let Some(n) = name {
            attrs.push(self.dict.attribute_kv(SPAN_NAME, string(n.clone()), ""));
        }
        self.contexts.insert(c, attrs.clone());
        attrs
    }
}

/// The sample attributes of a span, as Pyroscope stores them.
pub const SPAN_ID: &str = "span_id";
pub const SPAN_NAME: &str = "span_name";

#[derive(Default)]
struct Ev {
    stack: i64,
    state: i64,
    correlation: Correlation,
    value: i64,
}

/// Ticks of the chunk's clock in nanoseconds.
fn nanos(ticks: i64, per_second: i64) -> i64 {
    if per_second <= 0 || per_second == 1_000_000_000 {
        return ticks;
    }
    (i128::from(ticks) * 1_000_000_000 / i128::from(per_second)) as i64
}

/// The chunk headers of a file, for tools and tests.
pub fn headers(jfr: &[u8]) -> Result<Vec<Header>, Error> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < jfr.len() {
        let h = Header::read(&jfr[at..])?;
        at += h.size.max(HEADER_SIZE);
        out.push(h);
    }
    Ok(out)
}

/// What converting `jfr` may take, reserved before it: its bytes four
/// times (the pools' tables and the dictionary) and a sample per 8 bytes
/// of events, each counted at 160 bytes.
pub fn estimate(jfr: &[u8]) -> usize {
    jfr.len().saturating_mul(4) + (jfr.len() / 8).saturating_mul(160)
}

#[cfg(test)]
mod tests;
