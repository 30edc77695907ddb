//! OTLP -> Sentry `profile_chunk`s (sample format v2).
//!
//! One chunk per Profile and time window (at most 66 s, Relay's limit, and
//! at most 50 MiB of JSON). Timestamped samples keep their timestamps;
//! aggregated ones are expanded (see `expand`). Every chunk passes
//! [`check_v2`] before it is offered for sending; what Relay would refuse is
//! counted with the reason instead. Profiles that are not stacks sampled
//! over time, or repeat another Profile's samples under another sample
//! type, are not sent (see `select`).
//!
//! Accounting: a Sentry sample is one point; an OTLP Sample counts as sent
//! iff its first point is sent, so per chunk `otlp_samples` plus the OTLP
//! part of `dropped`, summed over a profile's results, is exactly the
//! profile's number of OTLP Samples.

mod expand;
mod select;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use hashbrown::HashMap;

use self::expand::{expand, thin, Aggregated, Point};
use super::outgoing::{
    ChunkFrame, ChunkProfile, ChunkSample, ClientSdk, DebugMeta, ProfileChunk, ThreadMetadata,
};
use super::relay_rules::{
    check_v2, exceeds_max_duration, relay_reads_image, MAX_CHUNK_DURATION_NS, RELAY_IMAGE_TYPES,
};
use crate::formats::sentry::ids;
use crate::formats::sentry::keys as k;
use crate::formats::sentry::otlp_builder::DEFAULT_PERIOD_NS;
use crate::formats::sentry::time::secs_to_unix_nanos;
use crate::formats::sentry::{Reason, MAX_ITEM_SIZE};
use crate::model::bounds::{late_time, MAX_POINTS_PER_SAMPLE_PER_SEC, MAX_PROFILE_DURATION_NS};
use crate::proto::{
    any_value::Value, AnyValue, KeyValue, KeyValueList, Profile, ProfilesData, ProfilesDictionary,
};

#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Most Sentry samples in one chunk, timestamped or spread from
    /// aggregated values; a fuller chunk is thinned evenly and the rest
    /// counted as dropped.
    pub max_samples_per_chunk: usize,
    /// Longest time window of one chunk; at most 66 s.
    pub max_chunk_duration_ns: u64,
    /// Largest chunk JSON; bigger windows are split.
    pub max_chunk_bytes: usize,
    /// Stands in for a profile's missing `time_unix_nano` (unix ns).
    pub now_unix_nano: u64,
    /// Platform of a profile whose data names none (else `native`).
    pub default_platform: Option<String>,
    /// Random, made once per exporter: goes into the `profiler_id` of
    /// resources that name no process (no `service.instance.id`,
    /// `host.name` or `process.pid`), so that replicas of one service do
    /// not share a profiler session. The default is made once per process.
    pub instance_id: [u8; 16],
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            max_samples_per_chunk: 100_000,
            max_chunk_duration_ns: MAX_CHUNK_DURATION_NS,
            max_chunk_bytes: MAX_ITEM_SIZE,
            now_unix_nano: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            default_platform: None,
            instance_id: process_instance_id(),
        }
    }
}

/// A random id made on first use, the same for the rest of the process.
fn process_instance_id() -> [u8; 16] {
    static ID: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    *ID.get_or_init(ids::random_uuid)
}

/// Samples left out, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub reason: Reason,
    /// Sentry samples (points).
    pub sentry_samples: u64,
    /// OTLP Samples whose first point was among them.
    pub otlp_samples: u64,
}

/// One chunk (or what was refused in its place).
#[derive(Debug, Clone)]
pub struct ChunkResult {
    /// The chunk after Relay's rules; `None` when nothing is to be sent.
    pub chunk: Option<ProfileChunk>,
    /// The chunk's JSON (empty when `chunk` is `None`).
    pub payload: Vec<u8>,
    /// Sentry samples in the chunk.
    pub sentry_samples: u64,
    /// OTLP Samples sent with this chunk (their first point is in it).
    pub otlp_samples: u64,
    pub dropped: Vec<Dropped>,
}

impl ChunkResult {
    fn refused(dropped: Vec<Dropped>) -> Self {
        Self {
            chunk: None,
            payload: Vec::new(),
            sentry_samples: 0,
            otlp_samples: 0,
            dropped,
        }
    }
}

/// Chunk windows' worth of points that aggregated values are spread into
/// at once (a bound on memory that no input value moves).
const MAX_EXPANDED_WINDOWS: u64 = 16;

/// Converts every Profile of `data` to chunks.
pub fn otlp_to_chunks(data: &ProfilesData, opts: &ExportOptions) -> Vec<ChunkResult> {
    let dict = Dict(crate::proto::dictionary_of(data));
    let mut out = Vec::new();
    for rp in &data.resource_profiles {
        let resource = rp.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        for sp in &rp.scope_profiles {
            let verdicts = select::select(dict, &sp.profiles);
            for (profile, verdict) in sp.profiles.iter().zip(verdicts) {
                match verdict {
                    None => ProfileExport::new(dict, resource, profile, opts).run(&mut out),
                    Some(_) if profile.samples.is_empty() => {}
                    Some(reason) => out.push(ChunkResult::refused(vec![select::all_dropped(
                        profile, reason,
                    )])),
                }
            }
        }
    }
    out
}

/// Bounds-checked dictionary access; a bad index reads as the zero value.
#[derive(Clone, Copy)]
struct Dict<'d>(&'d ProfilesDictionary);

impl<'d> Dict<'d> {
    fn str(self, i: i32) -> &'d str {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.0.string_table.get(i))
            .map_or("", String::as_str)
    }

    fn attr(self, i: i32) -> Option<(&'d str, &'d AnyValue)> {
        let a = self.0.attribute_table.get(usize::try_from(i).ok()?)?;
        Some((self.str(a.key_strindex), a.value.as_ref()?))
    }

    fn text(self, v: &'d AnyValue) -> Option<Cow<'d, str>> {
        match v.value.as_ref()? {
            Value::StringValue(s) => Some(Cow::Borrowed(s)),
            Value::StringValueStrindex(i) => Some(Cow::Borrowed(self.str(*i))),
            Value::IntValue(i) => Some(Cow::Owned(i.to_string())),
            Value::BoolValue(b) => Some(Cow::Owned(b.to_string())),
            Value::DoubleValue(d) => Some(Cow::Owned(d.to_string())),
            _ => None,
        }
    }

    fn attr_text(self, indices: &[i32], key: &str) -> Option<Cow<'d, str>> {
        indices
            .iter()
            .filter_map(|&i| self.attr(i))
            .find(|(kk, _)| *kk == key)
            .and_then(|(_, v)| self.text(v))
    }
}

fn resource_text<'r>(attrs: &'r [KeyValue], key: &str) -> Option<Cow<'r, str>> {
    let v = attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match v.value.as_ref()? {
        Value::StringValue(s) => Some(Cow::Borrowed(s)),
        Value::IntValue(i) => Some(Cow::Owned(i.to_string())),
        _ => None,
    }
}

fn nonempty(s: Option<Cow<'_, str>>) -> Option<String> {
    s.filter(|s| !s.is_empty()).map(Cow::into_owned)
}

/// Thread as Sentry names it.
#[derive(Debug, Clone, Default)]
struct ThreadInfo {
    id: String,
    name: Option<String>,
    priority: Option<u32>,
}

/// What a sample attribute means to the exporter (cached per index).
#[derive(Clone, Copy)]
enum AttrKind {
    ThreadId,
    ThreadName,
    ProcessPid,
    Other,
}

/// Everything chunks of one Profile share.
struct ProfileExport<'d> {
    dict: Dict<'d>,
    resource: &'d [KeyValue],
    profile: &'d Profile,
    opts: &'d ExportOptions,
    frames: Vec<ChunkFrame>,
    frame_ids: HashMap<ChunkFrame, u32>,
    location_frames: HashMap<i32, (u32, u32)>,
    loc_scratch: Vec<u32>,
    stacks: Vec<Vec<u32>>,
    stack_ids: HashMap<Vec<u32>, u32>,
    otlp_stacks: HashMap<i32, u32>,
    threads: Vec<ThreadInfo>,
    /// (thread.id, thread.name, process.pid) attribute indices -> thread.
    thread_keys: HashMap<(i32, i32, i32), u32>,
    attr_kinds: HashMap<i32, AttrKind>,
    /// Locations per runtime (from `profile.frame.type`), in order of first
    /// appearance: the most common runtime names the chunk's platform.
    runtimes: Vec<(&'static str, u32)>,
    /// Per frame id: the runtime its location's frame type names.
    frame_runtimes: Vec<Option<&'static str>>,
    /// Per frame id: the mappings of the locations it stands for.
    frame_mappings: Vec<Vec<i32>>,
    /// `debug_meta` image per mapping index (`None`: none Relay would read).
    mapping_images: HashMap<i32, Option<serde_json::Value>>,
    chunks_made: u64,
}

/// Per-chunk metadata shared by a Profile's chunks.
struct Meta {
    profiler_id: String,
    profile_id: Option<[u8; 16]>,
    platform: String,
    release: Option<String>,
    environment: Option<String>,
    client_sdk: ClientSdk,
    /// `debug_meta` as received; `None`: built per chunk from its mappings.
    received_debug_meta: Option<Option<DebugMeta>>,
    measurements: Option<Box<serde_json::value::RawValue>>,
}

impl<'d> ProfileExport<'d> {
    fn new(
        dict: Dict<'d>,
        resource: &'d [KeyValue],
        profile: &'d Profile,
        opts: &'d ExportOptions,
    ) -> Self {
        Self {
            dict,
            resource,
            profile,
            opts,
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            location_frames: HashMap::new(),
            loc_scratch: Vec::new(),
            stacks: Vec::new(),
            stack_ids: HashMap::new(),
            otlp_stacks: HashMap::new(),
            threads: Vec::new(),
            thread_keys: HashMap::new(),
            attr_kinds: HashMap::new(),
            runtimes: Vec::new(),
            frame_runtimes: Vec::new(),
            frame_mappings: Vec::new(),
            mapping_images: HashMap::new(),
            chunks_made: 0,
        }
    }

    fn run(mut self, out: &mut Vec<ChunkResult>) {
        // Times no recording has would drive the window loop and the
        // expansion below: refused before any work.
        if late_time(self.profile).is_some() || self.profile.duration_nano > MAX_PROFILE_DURATION_NS
        {
            out.push(ChunkResult::refused(vec![select::all_dropped(
                self.profile,
                Reason::ImplausibleTime,
            )]));
            return;
        }
        let (mut points, pre_dropped) = self.points();
        if !pre_dropped.is_empty() {
            out.push(ChunkResult::refused(pre_dropped));
        }
        if points.is_empty() {
            return;
        }
        points.sort_by_key(|p| p.ts);
        let max = self
            .opts
            .max_chunk_duration_ns
            .clamp(1, MAX_CHUNK_DURATION_NS);
        // A Profile longer than `max` is cut into windows of equal length,
        // not into full ones and a sliver (an SDK's 60 s chunk often runs a
        // few ms over: its tail alone would be too few samples to send).
        let span = points[points.len() - 1].ts - points[0].ts;
        let window = if span < max {
            max
        } else {
            span / (span / max + 1) + 1
        };
        // A window also ends where Relay, subtracting the timestamps as
        // serialized, would find more than 66 s.
        let mut windows = Vec::new();
        let mut i = 0;
        while i < points.len() {
            let start = points[i].ts;
            let end = start.saturating_add(window);
            // A window holds at least its first point, so the loop always
            // advances (an `end` saturated at `u64::MAX` holds none).
            let j = i
                + 1
                + points[i + 1..]
                    .partition_point(|p| p.ts < end && !exceeds_max_duration(start, p.ts));
            windows.push(i..j);
            i = j;
        }
        let mut meta = self.meta();
        // Each window takes the measurements that fall in it.
        let mut measurements = match meta.measurements.take() {
            Some(m) if windows.len() > 1 => {
                let starts: Vec<u64> = windows.iter().map(|w| points[w.start].ts).collect();
                split_measurements(&m, &starts)
            }
            m => vec![m],
        }
        .into_iter();
        for w in windows {
            meta.measurements = measurements.next().flatten();
            let mut pts = points[w].to_vec();
            let (thinned, thinned_homes) = thin(&mut pts, self.opts.max_samples_per_chunk.max(1));
            let mut dropped = Vec::new();
            if thinned > 0 {
                dropped.push(Dropped {
                    reason: Reason::MaxSamplesPerChunk,
                    sentry_samples: thinned,
                    otlp_samples: thinned_homes,
                });
            }
            self.emit(&pts, &meta, dropped, out);
        }
    }

    /// All points of the profile, and what could not become points.
    fn points(&mut self) -> (Vec<Point>, Vec<Dropped>) {
        let p = self.profile;
        let unit = p
            .sample_type
            .map(|t| self.dict.str(t.unit_strindex))
            .unwrap_or("");
        let per_point = points_per_value(unit, self.period_ns());
        let mut points = Vec::new();
        let mut aggregated = Vec::new();
        let mut empty = 0u64;
        let mut unsupported = 0u64;
        for s in &p.samples {
            let stack = self.stack(s.stack_index);
            let thread = self.thread(&s.attribute_indices);
            if !s.timestamps_unix_nano.is_empty() {
                points.extend(
                    s.timestamps_unix_nano
                        .iter()
                        .enumerate()
                        .map(|(j, &ts)| Point {
                            ts,
                            stack,
                            thread,
                            home: j == 0,
                        }),
                );
                continue;
            }
            let Some(per_point) = per_point else {
                unsupported += 1;
                continue;
            };
            let value = s
                .values
                .iter()
                .filter(|v| **v > 0)
                .fold(0u64, |t, &v| t.saturating_add(v as u64));
            let n = match per_point {
                PerPoint::Count => value,
                PerPoint::Nanos { unit_ns, period_ns } => {
                    let ns = value as u128 * unit_ns as u128;
                    let n = (ns + period_ns as u128 / 2) / period_ns as u128;
                    if n == 0 && value > 0 {
                        1
                    } else {
                        u64::try_from(n).unwrap_or(u64::MAX)
                    }
                }
            };
            if n == 0 {
                empty += 1;
            } else {
                aggregated.push(Aggregated { stack, thread, n });
            }
        }
        let mut dropped = Vec::new();
        if unsupported > 0 {
            dropped.push(Dropped {
                reason: Reason::UnsupportedSampleType,
                sentry_samples: 0,
                otlp_samples: unsupported,
            });
        }
        if empty > 0 {
            dropped.push(Dropped {
                reason: Reason::EmptySample,
                sentry_samples: 0,
                otlp_samples: empty,
            });
        }
        if !aggregated.is_empty() {
            let total: u64 = aggregated.iter().fold(0, |t, a| t.saturating_add(a.n));
            let duration = if p.duration_nano > 0 {
                p.duration_nano
            } else {
                total.saturating_mul(self.period_ns())
            };
            if let Some(reason) = implausible(aggregated.len(), total, duration) {
                // Nothing of the profile is sent; what was unsupported stays so.
                dropped.retain(|d| d.reason == Reason::UnsupportedSampleType);
                dropped.push(Dropped {
                    reason,
                    sentry_samples: points.len() as u64,
                    otlp_samples: p.samples.len() as u64 - unsupported,
                });
                return (Vec::new(), dropped);
            }
            let t0 = if p.time_unix_nano > 0 {
                p.time_unix_nano
            } else {
                self.opts.now_unix_nano.saturating_sub(duration)
            };
            let window = self
                .opts
                .max_chunk_duration_ns
                .clamp(1, MAX_CHUNK_DURATION_NS);
            // The points of at most 16 chunks are spread at once, whatever
            // the duration: a longer profile is thinned in proportion.
            let windows = duration.div_ceil(window).clamp(1, MAX_EXPANDED_WINDOWS);
            let capacity = windows.saturating_mul(self.opts.max_samples_per_chunk.max(1) as u64);
            let capped = expand(&aggregated, t0, duration, capacity, &mut points);
            if capped.points > 0 {
                dropped.push(Dropped {
                    reason: Reason::MaxSamplesPerChunk,
                    sentry_samples: capped.points,
                    otlp_samples: capped.samples,
                });
            }
        }
        (points, dropped)
    }

    /// The profile's sampling period in nanoseconds (1/101 s if unknown).
    fn period_ns(&self) -> u64 {
        let p = self.profile;
        let unit = p
            .period_type
            .map(|t| self.dict.str(t.unit_strindex))
            .unwrap_or("");
        match (time_unit_ns(unit), u64::try_from(p.period)) {
            (Some(f), Ok(period)) if period > 0 => period.saturating_mul(f),
            _ => DEFAULT_PERIOD_NS,
        }
    }

    fn meta(&self) -> Meta {
        let d = self.dict;
        let pa = &self.profile.attribute_indices[..];
        let res = self.resource;
        let profiler_id = d
            .attr_text(pa, k::SENTRY_PROFILER_ID)
            .as_deref()
            .and_then(ids::parse_uuid)
            .or_else(|| {
                // A v1 profile belongs to its transaction alone: its own
                // session, not one shared with the service's other v1
                // profiles (concurrent transactions, other workers), whose
                // samples would land on the same thread timeline.
                let v1 = d.attr_text(pa, k::SENTRY_VERSION).as_deref() == Some("1");
                let event = d.attr_text(pa, k::SENTRY_EVENT_ID).filter(|_| v1)?;
                Some(ids::stable_uuid(&[b"sentry v1 profile", event.as_bytes()]))
            })
            .unwrap_or_else(|| {
                let part = |key| resource_text(res, key).unwrap_or_default();
                let svc = part(k::SERVICE_NAME);
                // What tells one process apart from the service's others
                // (the eBPF profiler often names only its container).
                let instance = PROCESS_IDENTITY.map(part);
                if instance.iter().all(|p| p.is_empty()) {
                    // Nothing tells replicas of the service apart: this
                    // exporter's own session, not one shared with them.
                    return ids::stable_uuid(&[svc.as_bytes(), &self.opts.instance_id]);
                }
                let mut parts = vec![svc.as_bytes()];
                parts.extend(instance.iter().map(|p| p.as_bytes()));
                ids::stable_uuid(&parts)
            });
        let profile_id = <[u8; 16]>::try_from(self.profile.profile_id.as_slice())
            .ok()
            .filter(|id| *id != [0; 16]);
        let platform = nonempty(d.attr_text(pa, k::SENTRY_PLATFORM))
            .or_else(|| {
                resource_text(res, k::SDK_LANGUAGE)
                    .and_then(|l| k::platform_from_language(&l))
                    .map(str::to_owned)
            })
            .or_else(|| self.frame_runtime().map(str::to_owned))
            .or_else(|| self.opts.default_platform.clone())
            .unwrap_or_else(|| "native".to_owned());
        // A release is `package@version` in Sentry; an OTLP producer's
        // version alone would land beside every other service's "1.2.0".
        let release = nonempty(d.attr_text(pa, k::SENTRY_RELEASE)).or_else(|| {
            let version = nonempty(resource_text(res, k::SERVICE_VERSION))?;
            match nonempty(resource_text(res, k::SERVICE_NAME)) {
                Some(name) if !version.contains('@') => Some(format!("{name}@{version}")),
                _ => Some(version),
            }
        });
        let environment = nonempty(d.attr_text(pa, k::SENTRY_ENVIRONMENT))
            .or_else(|| nonempty(resource_text(res, k::DEPLOYMENT_ENVIRONMENT)))
            .or_else(|| nonempty(resource_text(res, k::DEPLOYMENT_ENVIRONMENT_OLD)));
        // The SDK that made the profile (`telemetry.sdk.*`), as Sentry
        // shows it; a producer that names none is sent as profcol's.
        let sdk_version = nonempty(resource_text(res, k::SDK_VERSION));
        let client_sdk = match (nonempty(resource_text(res, k::SDK_NAME)), sdk_version) {
            (Some(name), Some(version)) => ClientSdk { name, version },
            (Some(name), None) if name.starts_with("sentry.") => ClientSdk {
                name,
                version: String::new(),
            },
            _ => ClientSdk {
                name: "profcol".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
            },
        };
        // v1 measurements count nanoseconds since the profile start, a
        // shape Relay's chunk parser refuses: only v2 ones go back.
        let from_v2 = d.attr_text(pa, k::SENTRY_VERSION).as_deref() == Some("2");
        let measurements = d
            .attr_text(pa, k::SENTRY_MEASUREMENTS)
            .filter(|_| from_v2)
            .and_then(|m| serde_json::value::RawValue::from_string(m.into_owned()).ok());
        Meta {
            profiler_id: ids::format_uuid(&profiler_id),
            profile_id,
            platform,
            release,
            environment,
            client_sdk,
            received_debug_meta: self.received_debug_meta(),
            measurements,
        }
    }

    /// `debug_meta` as received (`sentry.debug_meta`), without the images
    /// Relay could not read; `None` when nothing was received.
    fn received_debug_meta(&self) -> Option<Option<DebugMeta>> {
        let d = self.dict;
        let raw = d.attr_text(&self.profile.attribute_indices, k::SENTRY_DEBUG_META)?;
        let serde_json::Value::Object(mut m) = serde_json::from_str(&raw).ok()? else {
            return None;
        };
        let Some(serde_json::Value::Array(images)) = m.remove("images") else {
            return None;
        };
        let images: Vec<_> = images.into_iter().filter(relay_reads_image).collect();
        Some((!images.is_empty()).then_some(DebugMeta { images }))
    }

    /// The `debug_meta` image of mapping `m`, if it has a build id or a
    /// debug id, and Relay would read it (an image with an unreadable
    /// `debug_id` would fail the whole chunk: it is left out alone).
    fn mapping_image(&mut self, m: i32) -> Option<serde_json::Value> {
        if let Some(img) = self.mapping_images.get(&m) {
            return img.clone();
        }
        let d = self.dict;
        let img = usize::try_from(m)
            .ok()
            .filter(|&i| i > 0)
            .and_then(|i| d.0.mapping_table.get(i))
            .and_then(|m| {
                let attr = |key| nonempty(d.attr_text(&m.attribute_indices, key));
                let gnu = attr(k::BUILD_ID_GNU).and_then(|h| hex::decode(h).ok());
                let debug_id = attr(k::SENTRY_DEBUG_ID)
                    .or_else(|| gnu.as_deref().and_then(ids::debug_id_from_build_id))?;
                let code_id = attr(k::SENTRY_CODE_ID).or_else(|| gnu.as_ref().map(hex::encode));
                let ty = attr(k::SENTRY_IMAGE_TYPE)
                    .filter(|t| RELAY_IMAGE_TYPES.contains(&t.as_str()))
                    .unwrap_or_else(|| "symbolic".to_owned());
                let mut img = serde_json::Map::new();
                img.insert("type".into(), ty.into());
                img.insert("debug_id".into(), debug_id.into());
                if let Some(c) = code_id {
                    img.insert("code_id".into(), c.into());
                }
                let file = d.str(m.filename_strindex);
                if !file.is_empty() {
                    img.insert("code_file".into(), file.into());
                }
                if let Some(f) = attr(k::SENTRY_DEBUG_FILE) {
                    img.insert("debug_file".into(), f.into());
                }
                if let Some(a) = attr(k::SENTRY_ARCH) {
                    img.insert("arch".into(), a.into());
                }
                img.insert("image_addr".into(), format!("{:#x}", m.memory_start).into());
                if m.memory_limit > m.memory_start {
                    img.insert(
                        "image_size".into(),
                        (m.memory_limit - m.memory_start).into(),
                    );
                }
                if let Some(vm) = attr(k::SENTRY_IMAGE_VMADDR).and_then(|v| v.parse::<u64>().ok()) {
                    img.insert("image_vmaddr".into(), format!("{vm:#x}").into());
                }
                Some(serde_json::Value::Object(img))
            })
            .filter(relay_reads_image);
        self.mapping_images.insert(m, img.clone());
        img
    }

    /// `debug_meta` of a chunk holding the (profile-wide) `frames`: as
    /// received, else the images of the mappings those frames come from,
    /// in mapping table order.
    fn chunk_debug_meta(
        &mut self,
        meta: &Meta,
        frames: impl Iterator<Item = u32>,
    ) -> Option<DebugMeta> {
        if let Some(received) = &meta.received_debug_meta {
            return received.clone();
        }
        let mut mappings: Vec<i32> = frames
            .flat_map(|f| self.frame_mappings[f as usize].iter().copied())
            .collect();
        mappings.sort_unstable();
        mappings.dedup();
        let images: Vec<_> = mappings
            .into_iter()
            .filter_map(|m| self.mapping_image(m))
            .collect();
        (!images.is_empty()).then_some(DebugMeta { images })
    }

    /// Sentry frames of one Location: one per Line (inlined first, leaf first).
    fn location_frames(&mut self, loc_index: i32) -> (u32, u32) {
        if let Some(&r) = self.location_frames.get(&loc_index) {
            return r;
        }
        let d = self.dict;
        let loc = usize::try_from(loc_index)
            .ok()
            .and_then(|i| d.0.location_table.get(i));
        let mut ids = Vec::new();
        if let Some(loc) = loc {
            let la = &loc.attribute_indices[..];
            let text = |key| d.attr_text(la, key);
            let in_app = la
                .iter()
                .filter_map(|&i| d.attr(i))
                .find(|(kk, _)| *kk == k::SENTRY_IN_APP)
                .and_then(|(_, v)| match v.value {
                    Some(Value::BoolValue(b)) => Some(b),
                    _ => None,
                });
            let mut module = nonempty(text(k::SENTRY_MODULE));
            let package = nonempty(text(k::SENTRY_PACKAGE));
            let platform = nonempty(text(k::SENTRY_PLATFORM));
            let runtime = text(k::FRAME_TYPE)
                .as_deref()
                .and_then(k::platform_from_frame_type);
            if let Some(r) = runtime {
                match self.runtimes.iter_mut().find(|(p, _)| *p == r) {
                    Some((_, n)) => *n += 1,
                    None => self.runtimes.push((r, 1)),
                }
            }
            let filename_attr = text(k::SENTRY_FILENAME);
            let abs_path_attr = text(k::SENTRY_ABS_PATH);
            // The eBPF profiler puts line numbers or bytecode offsets in the
            // address of interpreted frames: only machine code has addresses.
            let addr =
                (loc.address != 0 && runtime.is_none_or(is_machine_code)).then_some(loc.address);
            // An unsymbolized native frame (eBPF, perf): its image names it,
            // in `package`. Relay's `Frame` has no `package` and drops it,
            // which would leave Sentry only an address: the file's name goes
            // in `module` too.
            let package = package.or_else(|| {
                let m = usize::try_from(loc.mapping_index)
                    .ok()
                    .filter(|&i| i > 0 && loc.lines.is_empty())
                    .and_then(|i| d.0.mapping_table.get(i))?;
                let file = nonempty(Some(Cow::Borrowed(d.str(m.filename_strindex))))?;
                if module.is_none() {
                    module = Some(basename(&file).to_owned());
                }
                Some(file)
            });
            let frame_for =
                |function: Option<String>, fn_file: &str, line: i64, column: i64| ChunkFrame {
                    abs_path: match &abs_path_attr {
                        Some(a) => nonempty(Some(a.clone())),
                        None => nonempty(Some(Cow::Borrowed(fn_file))),
                    },
                    filename: match &filename_attr {
                        Some(f) => nonempty(Some(f.clone())),
                        None => nonempty(Some(Cow::Borrowed(fn_file))),
                    },
                    function,
                    // Relay reads `u32`s: a bigger number is left out.
                    lineno: u32::try_from(line).ok().filter(|l| *l > 0),
                    colno: u32::try_from(column).ok().filter(|c| *c > 0),
                    in_app,
                    instruction_addr: addr,
                    module: module.clone(),
                    package: package.clone(),
                    platform: platform.clone(),
                };
            let mut frames: Vec<ChunkFrame> = Vec::new();
            for line in &loc.lines {
                let f = usize::try_from(line.function_index)
                    .ok()
                    .and_then(|i| d.0.function_table.get(i));
                let (name, file) = match f {
                    Some(f) => {
                        let name = d.str(f.name_strindex);
                        let name = if name.is_empty() {
                            d.str(f.system_name_strindex)
                        } else {
                            name
                        };
                        (
                            nonempty(Some(Cow::Borrowed(name))),
                            d.str(f.filename_strindex),
                        )
                    }
                    None => (None, ""),
                };
                frames.push(frame_for(name, file, line.line, line.column));
            }
            if frames.is_empty() {
                // Nothing else names it (the eBPF profiler's `abort-marker`
                // and `*-error` pseudo-frames): its frame type does, so such
                // frames stay apart and readable.
                let name = (addr.is_none() && package.is_none())
                    .then(|| nonempty(text(k::FRAME_TYPE)))
                    .flatten()
                    .map(|t| format!("[{t}]"));
                frames.push(frame_for(name, "", 0, 0));
            }
            for f in frames {
                let next = self.frames.len() as u32;
                let id = *self.frame_ids.entry(f).or_insert_with_key(|f| {
                    self.frames.push(f.clone());
                    self.frame_runtimes.push(runtime);
                    self.frame_mappings.push(Vec::new());
                    next
                });
                if loc.mapping_index > 0 {
                    let ms = &mut self.frame_mappings[id as usize];
                    if !ms.contains(&loc.mapping_index) {
                        ms.push(loc.mapping_index);
                    }
                }
                ids.push(id);
            }
        }
        let start = self.loc_scratch.len() as u32;
        self.loc_scratch.extend_from_slice(&ids);
        let r = (start, ids.len() as u32);
        self.location_frames.insert(loc_index, r);
        r
    }

    /// The runtime of most of the profile's locations; native code only
    /// when no interpreter or VM shows up (an eBPF stack of a Python
    /// process holds kernel and libpython frames below the Python ones).
    fn frame_runtime(&self) -> Option<&'static str> {
        let best = |native: bool| {
            self.runtimes
                .iter()
                .filter(|(p, _)| (*p == "native") == native)
                .fold(
                    None,
                    |best: Option<(&'static str, u32)>, &(p, n)| match best {
                        Some((_, m)) if m >= n => best,
                        _ => Some((p, n)),
                    },
                )
                .map(|(p, _)| p)
        };
        best(false).or_else(|| best(true))
    }

    /// Frame `f` as a chunk of `platform` holds it: a frame of another
    /// runtime (native code in a Python chunk) names its own platform, as
    /// in Sentry's hybrid profiles.
    fn chunk_frame(&self, f: u32, platform: &str) -> ChunkFrame {
        let mut frame = self.frames[f as usize].clone();
        if frame.platform.is_none() {
            let own = k::frame_type(platform).and_then(k::platform_from_frame_type);
            if let Some(r) = self.frame_runtimes[f as usize].filter(|r| Some(*r) != own) {
                frame.platform = Some(r.to_owned());
            }
        }
        frame
    }

    /// Sentry stack id (profile-wide) of an OTLP stack; frames leaf first.
    fn stack(&mut self, stack_index: i32) -> u32 {
        if let Some(&s) = self.otlp_stacks.get(&stack_index) {
            return s;
        }
        let locs: Vec<i32> = usize::try_from(stack_index)
            .ok()
            .and_then(|i| self.dict.0.stack_table.get(i))
            .map(|s| s.location_indices.clone())
            .unwrap_or_default();
        let mut frames = Vec::new();
        for l in locs {
            let (start, len) = self.location_frames(l);
            frames.extend_from_slice(&self.loc_scratch[start as usize..(start + len) as usize]);
        }
        let next = self.stacks.len() as u32;
        let id = match self.stack_ids.get(&frames) {
            Some(&id) => id,
            None => {
                self.stacks.push(frames.clone());
                self.stack_ids.insert(frames, next);
                next
            }
        };
        self.otlp_stacks.insert(stack_index, id);
        id
    }

    /// Thread (profile-wide index) named by a sample's attributes.
    fn thread(&mut self, attrs: &[i32]) -> u32 {
        let d = self.dict;
        let (mut id_attr, mut name_attr, mut pid_attr) = (0, 0, 0);
        for &i in attrs {
            let kind = *self.attr_kinds.entry(i).or_insert_with(|| match d.attr(i) {
                Some((k::THREAD_ID, _)) => AttrKind::ThreadId,
                Some((k::THREAD_NAME, _)) => AttrKind::ThreadName,
                Some((k::PROCESS_PID, _)) => AttrKind::ProcessPid,
                _ => AttrKind::Other,
            });
            match kind {
                AttrKind::ThreadId => id_attr = i,
                AttrKind::ThreadName => name_attr = i,
                AttrKind::ProcessPid => pid_attr = i,
                AttrKind::Other => {}
            }
        }
        let key = (id_attr, name_attr, pid_attr);
        if let Some(&t) = self.thread_keys.get(&key) {
            return t;
        }
        let text = |i: i32| d.attr(i).and_then(|(_, v)| d.text(v)).map(Cow::into_owned);
        let name = text(name_attr).filter(|n| !n.is_empty());
        let pid = text(pid_attr).unwrap_or_default();
        let id = match (text(id_attr), &name) {
            (Some(id), _) if !id.is_empty() => id,
            (_, Some(name)) => id_from_name(&pid, name),
            _ if !pid.is_empty() => id_from_name(&pid, ""),
            _ => "0".to_owned(),
        };
        let t = self.threads.len() as u32;
        self.threads.push(ThreadInfo {
            id,
            name,
            priority: None,
        });
        self.thread_keys.insert(key, t);
        t
    }

    /// Names and priorities from the `sentry.thread_metadata` table.
    fn thread_table(&self) -> HashMap<&'d str, (Option<&'d str>, Option<u32>)> {
        let mut out = HashMap::new();
        let table = self
            .profile
            .attribute_indices
            .iter()
            .filter_map(|&i| self.dict.attr(i))
            .find(|(kk, _)| *kk == k::SENTRY_THREAD_METADATA)
            .and_then(|(_, v)| match &v.value {
                Some(Value::KvlistValue(KeyValueList { values })) => Some(values),
                _ => None,
            });
        for kv in table.into_iter().flatten() {
            let mut name = None;
            let mut priority = None;
            if let Some(Value::KvlistValue(fields)) =
                kv.value.as_ref().and_then(|v| v.value.as_ref())
            {
                for f in &fields.values {
                    match (
                        f.key.as_str(),
                        f.value.as_ref().and_then(|v| v.value.as_ref()),
                    ) {
                        ("name", Some(Value::StringValue(s))) => name = Some(s.as_str()),
                        // Relay reads a `u32`: another number is left out.
                        ("priority", Some(Value::IntValue(p))) => priority = u32::try_from(*p).ok(),
                        _ => {}
                    }
                }
            }
            out.insert(kv.key.as_str(), (name, priority));
        }
        out
    }

    fn next_chunk_id(&mut self, meta: &Meta) -> String {
        let n = self.chunks_made;
        self.chunks_made += 1;
        let id = match (meta.profile_id, n) {
            (Some(id), 0) => id,
            (Some(id), n) => ids::stable_uuid(&[id.as_slice(), n.to_be_bytes().as_slice()]),
            (None, _) => ids::random_uuid(),
        };
        ids::format_uuid(&id)
    }

    /// Builds, checks and serializes the chunk of `pts`; splits it in two
    /// when its JSON is over the size limit.
    fn emit(
        &mut self,
        pts: &[Point],
        meta: &Meta,
        mut dropped: Vec<Dropped>,
        out: &mut Vec<ChunkResult>,
    ) {
        let mut chunk = self.build(pts, meta);
        let homes = pts.iter().filter(|p| p.home).count() as u64;
        let pruned = match check_v2(&mut chunk) {
            Ok(p) => p,
            Err(reason) => {
                dropped.push(Dropped {
                    reason,
                    sentry_samples: pts.len() as u64,
                    otlp_samples: homes,
                });
                out.push(ChunkResult::refused(dropped));
                return;
            }
        };
        let payload = chunk.to_json();
        if payload.len() > self.opts.max_chunk_bytes {
            if pts.len() > 1 {
                let mid = pts.len() / 2;
                self.chunks_made -= 1;
                self.emit(&pts[..mid], meta, dropped, out);
                self.emit(&pts[mid..], meta, Vec::new(), out);
            } else {
                self.chunks_made -= 1;
                dropped.push(Dropped {
                    reason: Reason::TooLarge,
                    sentry_samples: pts.len() as u64,
                    otlp_samples: homes,
                });
                out.push(ChunkResult::refused(dropped));
            }
            return;
        }
        if pruned.samples > 0 {
            dropped.push(Dropped {
                reason: Reason::SingleSampleThread,
                sentry_samples: pruned.samples,
                otlp_samples: pruned.homes,
            });
        }
        out.push(ChunkResult {
            sentry_samples: chunk.profile.samples.len() as u64,
            otlp_samples: homes - pruned.homes,
            chunk: Some(chunk),
            payload,
            dropped,
        });
    }

    /// A chunk holding `pts`, with only the stacks, frames and threads they use.
    fn build(&mut self, pts: &[Point], meta: &Meta) -> ProfileChunk {
        let mut stack_map: HashMap<u32, u32> = HashMap::new();
        let mut frame_map: HashMap<u32, u32> = HashMap::new();
        let mut thread_map: HashMap<u32, u32> = HashMap::new();
        let mut profile = ChunkProfile::default();
        profile.samples.reserve(pts.len());
        for p in pts {
            let stack_id = match stack_map.get(&p.stack) {
                Some(&s) => s,
                None => {
                    let frames = self.stacks[p.stack as usize]
                        .iter()
                        .map(|&f| {
                            *frame_map.entry(f).or_insert_with(|| {
                                profile.frames.push(self.chunk_frame(f, &meta.platform));
                                (profile.frames.len() - 1) as u32
                            })
                        })
                        .collect();
                    profile.stacks.push(frames);
                    let s = (profile.stacks.len() - 1) as u32;
                    stack_map.insert(p.stack, s);
                    s
                }
            };
            let thread = *thread_map.entry(p.thread).or_insert_with(|| {
                profile
                    .thread_ids
                    .push(self.threads[p.thread as usize].id.clone());
                (profile.thread_ids.len() - 1) as u32
            });
            profile.samples.push(ChunkSample {
                timestamp_unix_nano: p.ts,
                stack_id,
                thread,
                home: p.home,
            });
        }
        let table = self.thread_table();
        let mut thread_metadata = BTreeMap::new();
        for &t in thread_map.keys() {
            let info = &self.threads[t as usize];
            let (tname, priority) = table.get(info.id.as_str()).copied().unwrap_or_default();
            let name = info.name.clone().or_else(|| tname.map(str::to_owned));
            let priority = info.priority.or(priority);
            if name.is_some() || priority.is_some() {
                thread_metadata.insert(info.id.clone(), ThreadMetadata { name, priority });
            }
        }
        profile.thread_metadata = thread_metadata;
        let debug_meta = self.chunk_debug_meta(meta, frame_map.keys().copied());
        ProfileChunk {
            chunk_id: self.next_chunk_id(meta),
            profiler_id: meta.profiler_id.clone(),
            debug_meta,
            environment: meta.environment.clone(),
            platform: meta.platform.clone(),
            release: meta.release.clone(),
            client_sdk: meta.client_sdk.clone(),
            version: "2",
            measurements: meta.measurements.clone(),
            profile,
        }
    }
}

/// Resource attributes that tell one process of a service from another,
/// for its profiler session.
const PROCESS_IDENTITY: [&str; 6] = [
    k::SERVICE_INSTANCE_ID,
    k::HOST_NAME,
    k::PROCESS_PID,
    k::CONTAINER_ID,
    k::K8S_POD_UID,
    k::HOST_ID,
];

/// A chunk's `measurements` (Sentry's JSON: per name a `unit` and `values`
/// of `{timestamp, value}`, timestamps in float seconds) shared among the
/// parts of a chunk cut at `starts` (unix ns, ascending; the first part also
/// takes what comes before, the last what comes after): one per part, `None`
/// where no value falls.
fn split_measurements(
    all: &serde_json::value::RawValue,
    starts: &[u64],
) -> Vec<Option<Box<serde_json::value::RawValue>>> {
    use serde_json::{Map, Value};
    let mut parts: Vec<Map<String, Value>> = vec![Map::new(); starts.len()];
    let all: Map<String, Value> = serde_json::from_str(all.get()).unwrap_or_default();
    for (name, mut m) in all {
        let Some(Value::Array(values)) = m.get_mut("values").map(Value::take) else {
            continue;
        };
        for v in values {
            let secs = match v.get("timestamp") {
                Some(Value::Number(n)) => n.as_f64(),
                Some(Value::String(s)) => s.parse().ok(),
                _ => None,
            };
            let Some(t) = secs.and_then(secs_to_unix_nanos) else {
                continue;
            };
            let part = starts.partition_point(|&s| s <= t).saturating_sub(1);
            let entry = parts[part].entry(name.clone()).or_insert_with(|| {
                let mut e = m.clone();
                e["values"] = Value::Array(Vec::new());
                e
            });
            if let Some(Value::Array(vs)) = entry.get_mut("values") {
                vs.push(v);
            }
        }
    }
    parts
        .into_iter()
        .map(|p| {
            (!p.is_empty())
                .then(|| serde_json::value::to_raw_value(&p).ok())
                .flatten()
        })
        .collect()
}

#[derive(Clone, Copy)]
enum PerPoint {
    Count,
    Nanos { unit_ns: u64, period_ns: u64 },
}

fn time_unit_ns(unit: &str) -> Option<u64> {
    Some(match unit {
        "nanoseconds" | "nanosecond" | "ns" => 1,
        "microseconds" | "microsecond" | "us" => 1_000,
        "milliseconds" | "millisecond" | "ms" => 1_000_000,
        "seconds" | "second" | "s" => 1_000_000_000,
        _ => return None,
    })
}

/// Why aggregated values are no recording, if they are not: `samples`
/// OTLP samples worth `points` in all over `duration_ns` are more than 1 kHz
/// per sample, or a duration (given, or made up from the values) over a day.
/// Checked before any point is made, since both drive the work.
fn implausible(samples: usize, points: u64, duration_ns: u64) -> Option<Reason> {
    if duration_ns > MAX_PROFILE_DURATION_NS {
        return Some(Reason::ImplausibleTime);
    }
    let per_sample = (duration_ns / (1_000_000_000 / MAX_POINTS_PER_SAMPLE_PER_SEC)).max(1);
    (points > (samples as u64).saturating_mul(per_sample)).then_some(Reason::ImplausibleValues)
}

/// How many points one unit of a sample value is worth; `None` for units
/// that are not occurrences or time (bytes, ...).
fn points_per_value(unit: &str, period_ns: u64) -> Option<PerPoint> {
    match unit {
        "" | "count" | "samples" => Some(PerPoint::Count),
        u => time_unit_ns(u).map(|unit_ns| PerPoint::Nanos {
            unit_ns,
            period_ns: period_ns.max(1),
        }),
    }
}

/// Runtimes whose frames are machine code, with meaningful addresses.
fn is_machine_code(runtime: &str) -> bool {
    matches!(runtime, "native" | "go" | "rust")
}

/// The last component of a path (`/usr/lib/libc.so.6` -> `libc.so.6`).
fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\'])
        .find(|p| !p.is_empty())
        .unwrap_or(path)
}

/// A thread id for a thread known only by name (and process, when samples
/// of several processes share a Profile, as from the eBPF profiler):
/// stable, decimal, and small enough (53 bits) for any JSON reader.
fn id_from_name(pid: &str, name: &str) -> String {
    let h = ids::stable_uuid(&[pid.as_bytes(), name.as_bytes()]);
    let mut b = [0u8; 8];
    b.copy_from_slice(&h[..8]);
    (u64::from_be_bytes(b) >> 11).to_string()
}
