//! Perfetto `profile_chunk`s, which sentry-java sends on Android 15+ (API
//! 35) from `ProfilingManager`: one item whose payload is the chunk's JSON
//! metadata followed by a binary Perfetto trace, split at the item header's
//! `meta_length` and marked `content_type: application/x-perfetto-trace`.
//!
//! Converted as Relay converts them (`relay-profiling/src/perfetto`) into
//! the sample format v2 shapes, which the v2 path then turns into OTLP:
//! `PerfSample` packets resolved against their sequence's interned
//! callstacks, frames, function names and mappings (tables cleared when a
//! packet says its incremental state was), Java frames (a mapping that is
//! an `.oat`, `.odex`, `.vdex`, `.jar`, `.dex` or the JIT cache) split into
//! class and method, native frames at `rel_pc` + mapping start with their
//! ELF mapping as a debug image, boot-clock times moved to the wall clock
//! by the first `ClockSnapshot`, and the pid's thread named `main`.
//!
//! Relay's bounds hold: 100,000 samples, 110,000 packets of at most 4 MiB
//! each, 1,000 frames a stack, 100 path segments, 64 sequences, and about
//! 15 MiB of interning tables and 40 MiB of result; past any of them the
//! item is refused (`profiling_exceed_size_limit`) before more is read.
//!
//! Unlike Relay: sample times keep their nanoseconds (Relay rounds to
//! milliseconds), thread names that `ProcessTree` or `TrackDescriptor`
//! packets give are kept (Relay names only `main`), and a native image also
//! carries its build id as `code_id`, which the `symbolizer` looks up.

pub mod proto;

use std::collections::BTreeMap;

use bytes::Buf;
use hashbrown::{HashMap, HashSet};
use prost::encoding::{self, WireType};
use prost::Message;

use crate::de::{CowStr, ThreadId};
use crate::frame::{DebugImage, Frame, ThreadMeta};
use crate::v2::chunk::{ChunkData, ChunkSample};
use crate::{ids, ItemError, Reason};
use proto::Data;

/// The item header's `content_type` of a Perfetto chunk.
pub const CONTENT_TYPE: &str = "application/x-perfetto-trace";

const MAX_SAMPLES: usize = 100_000;
/// Samples plus room for clock, interning and descriptor packets.
const MAX_TRACE_PACKETS: usize = MAX_SAMPLES + 10_000;
const MAX_TRACE_PACKET_BYTES: usize = 4 << 20;
const MAX_CALLSTACK_DEPTH: usize = 1000;
const MAX_PATH_SEGMENTS: usize = 100;
const MAX_SEQUENCES: usize = 64;
/// Interning tables of every sequence together.
const MAX_WORK_BYTES: usize = 15 << 20;
/// Frames, stacks, samples and images of the result.
const MAX_RESULT_BYTES: usize = 40 << 20;

/// <https://perfetto.dev/docs/reference/trace-packet-proto#SequenceFlags>
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// Perfetto's builtin clocks (<https://perfetto.dev/docs/concepts/clock-sync>).
const CLOCK_REALTIME: u32 = 1;
const CLOCK_BOOTTIME: u32 = 6;

/// A trace as sample format v2 data, and the images of its native frames.
#[derive(Debug)]
pub struct Converted {
    pub data: ChunkData<'static>,
    pub images: Vec<DebugImage<'static>>,
}

fn too_large(what: impl std::fmt::Display) -> ItemError {
    ItemError::new(
        Reason::ExceedSizeLimit,
        format!("Perfetto trace exceeds a limit: {what}"),
    )
}

fn invalid(what: impl std::fmt::Display) -> ItemError {
    ItemError::new(
        Reason::InvalidSampledProfile,
        format!("invalid Perfetto trace: {what}"),
    )
}

/// Converts a binary Perfetto trace.
pub fn convert(trace: &[u8]) -> Result<Converted, ItemError> {
    let mut st = State::default();
    let mut clock_offset: Option<i128> = None;
    let mut pid: Option<u32> = None;
    let mut names: BTreeMap<u32, String> = BTreeMap::new();
    let mut samples: Vec<(u64, u32, usize)> = Vec::new();

    visit_packets(trace, |packet| {
        let seq = packet.trusted_packet_sequence_id.unwrap_or(0);
        st.intern(seq, &packet)?;
        match packet.data {
            Some(Data::ClockSnapshot(cs)) if clock_offset.is_none() => {
                let at = |id| {
                    cs.clocks
                        .iter()
                        .find(|c| c.clock_id == Some(id))
                        .and_then(|c| c.timestamp)
                };
                if let (Some(real), Some(boot)) = (at(CLOCK_REALTIME), at(CLOCK_BOOTTIME)) {
                    clock_offset = Some(i128::from(real) - i128::from(boot));
                }
            }
            Some(Data::PerfSample(s)) => {
                if let Some(cs) = s.callstack_iid {
                    pid = pid.or(s.pid);
                    if let Some(stack) = st.callstack(seq, cs)? {
                        st.charge_result(24)?;
                        samples.push((packet.timestamp.unwrap_or(0), s.tid.unwrap_or(0), stack));
                    }
                }
            }
            Some(Data::ProcessTree(t)) => {
                for th in t.threads {
                    name_thread(&mut names, &mut st, th.tid, th.name)?;
                }
            }
            Some(Data::TrackDescriptor(d)) => {
                if let Some(th) = d.thread {
                    name_thread(&mut names, &mut st, th.tid, th.thread_name)?;
                }
            }
            _ => {}
        }
        Ok(())
    })?;

    if samples.is_empty() {
        return Err(ItemError::new(
            Reason::NotEnoughSamples,
            "Perfetto trace has no resolvable PerfSample",
        ));
    }
    let offset = clock_offset
        .ok_or_else(|| invalid("no ClockSnapshot with both the boot and the real-time clock"))?;
    samples.sort_unstable_by_key(|s| s.0);
    let samples = samples
        .into_iter()
        .map(|(ts, tid, stack_id)| ChunkSample {
            timestamp: (i128::from(ts) + offset) as f64 / 1e9,
            stack_id,
            thread_id: ThreadId::Num(u64::from(tid)),
        })
        .collect();
    if let Some(pid) = pid {
        names.entry(pid).or_insert_with(|| "main".to_owned());
    }
    let thread_metadata = names
        .into_iter()
        .map(|(tid, name)| {
            let meta = ThreadMeta {
                name: Some(owned(name)),
                priority: None,
            };
            (owned(tid.to_string()), meta)
        })
        .collect();
    Ok(Converted {
        data: ChunkData {
            samples,
            stacks: st.stacks,
            frames: st.frames,
            thread_metadata: Some(thread_metadata),
        },
        images: st.images,
    })
}

fn owned(s: String) -> CowStr<'static> {
    CowStr(s.into())
}

/// The first name a trace gives a thread stays.
fn name_thread(
    names: &mut BTreeMap<u32, String>,
    st: &mut State,
    tid: Option<i32>,
    name: Option<String>,
) -> Result<(), ItemError> {
    if let (Some(tid), Some(name)) = (tid.and_then(|t| u32::try_from(t).ok()), name) {
        if let std::collections::btree_map::Entry::Vacant(e) = names.entry(tid) {
            st.charge_result(name.len() + 32)?;
            e.insert(name);
        }
    }
    Ok(())
}

/// Reads the top-level `Trace.packet` fields one at a time, so that no
/// more than one packet is decoded at once and the counts are checked
/// before the work.
fn visit_packets(
    mut buf: &[u8],
    mut visit: impl FnMut(proto::TracePacket) -> Result<(), ItemError>,
) -> Result<(), ItemError> {
    let (mut packets, mut samples) = (0usize, 0usize);
    while buf.has_remaining() {
        let (tag, wire) = encoding::decode_key(&mut buf).map_err(invalid)?;
        if tag != 1 {
            encoding::skip_field(wire, tag, &mut buf, encoding::DecodeContext::default())
                .map_err(invalid)?;
            continue;
        }
        if wire != WireType::LengthDelimited {
            return Err(invalid("Trace.packet is not a message"));
        }
        packets += 1;
        if packets > MAX_TRACE_PACKETS {
            return Err(too_large(format_args!("over {MAX_TRACE_PACKETS} packets")));
        }
        let len = encoding::decode_varint(&mut buf).map_err(invalid)?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > MAX_TRACE_PACKET_BYTES {
            return Err(too_large(format_args!(
                "a packet of {len} bytes (at most {MAX_TRACE_PACKET_BYTES})"
            )));
        }
        let body = buf.get(..len).ok_or_else(|| invalid("truncated packet"))?;
        let packet = proto::TracePacket::decode(body).map_err(invalid)?;
        buf.advance(len);
        if matches!(packet.data, Some(Data::PerfSample(_))) {
            samples += 1;
            if samples > MAX_SAMPLES {
                return Err(too_large(format_args!("over {MAX_SAMPLES} samples")));
            }
        }
        visit(packet)?;
    }
    Ok(())
}

/// One sequence's interned data, and what of it was already resolved.
#[derive(Default)]
struct Tables {
    function_names: HashMap<u64, String>,
    mapping_paths: HashMap<u64, String>,
    build_ids: HashMap<u64, Vec<u8>>,
    frames: HashMap<u64, proto::Frame>,
    callstacks: HashMap<u64, Vec<u64>>,
    mappings: HashMap<u64, proto::Mapping>,
    /// Bytes these tables hold, charged to the work budget.
    bytes: usize,
    resolved_frames: HashMap<u64, usize>,
    resolved_stacks: HashMap<u64, usize>,
}

#[derive(Hash, PartialEq, Eq)]
struct FrameKey {
    function: Option<String>,
    module: Option<String>,
    package: Option<String>,
    addr: Option<u64>,
}

#[derive(Default)]
struct State {
    sequences: HashMap<u32, Tables>,
    work_bytes: usize,
    result_bytes: usize,
    frames: Vec<Frame<'static>>,
    frame_index: HashMap<FrameKey, usize>,
    stacks: Vec<Vec<usize>>,
    stack_index: HashMap<Vec<usize>, usize>,
    images: Vec<DebugImage<'static>>,
    seen_images: HashSet<(String, u64)>,
}

impl State {
    fn charge_result(&mut self, bytes: usize) -> Result<(), ItemError> {
        self.result_bytes += bytes;
        if self.result_bytes > MAX_RESULT_BYTES {
            return Err(too_large(format_args!(
                "the converted profile passes {MAX_RESULT_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// Merges a packet's interned data into its sequence's tables, after
    /// clearing them if the packet says so.
    fn intern(&mut self, seq: u32, packet: &proto::TracePacket) -> Result<(), ItemError> {
        let cleared = packet
            .sequence_flags
            .is_some_and(|f| f & SEQ_INCREMENTAL_STATE_CLEARED != 0);
        if !cleared && packet.interned_data.is_none() {
            return Ok(());
        }
        if !self.sequences.contains_key(&seq) && self.sequences.len() >= MAX_SEQUENCES {
            return Err(too_large(format_args!("over {MAX_SEQUENCES} sequences")));
        }
        let tables = self.sequences.entry(seq).or_default();
        if cleared {
            self.work_bytes -= tables.bytes;
            *tables = Tables::default();
        }
        let Some(data) = &packet.interned_data else {
            return Ok(());
        };
        let mut bytes = 0;
        let mut strings = |into: &mut HashMap<u64, String>, from: &[proto::InternedString]| {
            for s in from {
                if let (Some(iid), Some(v)) = (s.iid, &s.str) {
                    bytes += v.len() + 32;
                    into.insert(iid, String::from_utf8_lossy(v).into_owned());
                }
            }
        };
        strings(&mut tables.function_names, &data.function_names);
        strings(&mut tables.mapping_paths, &data.mapping_paths);
        for s in &data.build_ids {
            if let (Some(iid), Some(v)) = (s.iid, &s.str) {
                bytes += v.len() + 32;
                tables.build_ids.insert(iid, v.clone());
            }
        }
        for f in &data.frames {
            if let Some(iid) = f.iid {
                bytes += 48;
                tables.frames.insert(iid, *f);
            }
        }
        for c in &data.callstacks {
            if let Some(iid) = c.iid {
                bytes += c.frame_ids.len() * 8 + 32;
                tables.callstacks.insert(iid, c.frame_ids.clone());
            }
        }
        for m in &data.mappings {
            if let Some(iid) = m.iid {
                bytes += m.path_string_ids.len() * 8 + 64;
                tables.mappings.insert(iid, m.clone());
            }
        }
        tables.bytes += bytes;
        self.work_bytes += bytes;
        if self.work_bytes > MAX_WORK_BYTES {
            return Err(too_large(format_args!(
                "interned data passes {MAX_WORK_BYTES} bytes"
            )));
        }
        Ok(())
    }

    /// The stack of an interned callstack, leaf first; `None` when the
    /// sequence interned no such callstack (the sample is left out).
    fn callstack(&mut self, seq: u32, iid: u64) -> Result<Option<usize>, ItemError> {
        let Some(tables) = self.sequences.get(&seq) else {
            return Ok(None);
        };
        if let Some(&s) = tables.resolved_stacks.get(&iid) {
            return Ok(Some(s));
        }
        let Some(frame_ids) = tables.callstacks.get(&iid) else {
            return Ok(None);
        };
        if frame_ids.len() > MAX_CALLSTACK_DEPTH {
            return Err(too_large(format_args!(
                "a stack of {} frames (at most {MAX_CALLSTACK_DEPTH})",
                frame_ids.len()
            )));
        }
        let frame_ids = frame_ids.clone();
        let mut stack = Vec::with_capacity(frame_ids.len());
        for fid in frame_ids {
            if let Some(i) = self.frame(seq, fid)? {
                stack.push(i);
            }
        }
        // Perfetto stacks are root first; Sentry's and OTLP's leaf first.
        stack.reverse();
        let id = match self.stack_index.get(&stack) {
            Some(&id) => id,
            None => {
                self.charge_result(stack.len() * 16 + 48)?;
                let id = self.stacks.len();
                self.stacks.push(stack.clone());
                self.stack_index.insert(stack, id);
                id
            }
        };
        if let Some(t) = self.sequences.get_mut(&seq) {
            t.resolved_stacks.insert(iid, id);
        }
        Ok(Some(id))
    }

    fn frame(&mut self, seq: u32, iid: u64) -> Result<Option<usize>, ItemError> {
        let tables = &self.sequences[&seq];
        if let Some(&i) = tables.resolved_frames.get(&iid) {
            return Ok(Some(i));
        }
        let Some(pf) = tables.frames.get(&iid).copied() else {
            return Ok(None);
        };
        let function = pf
            .function_name_id
            .and_then(|id| tables.function_names.get(&id))
            .cloned();
        let mapping = pf
            .mapping_id
            .and_then(|id| tables.mappings.get(&id))
            .cloned();
        let path = match &mapping {
            Some(m) => mapping_path(m, tables)?,
            None => None,
        };
        let java = path.as_deref().is_some_and(is_java_mapping);
        let (key, frame) = if java {
            let (module, function) = match function {
                Some(name) => match name.rsplit_once('.') {
                    Some((class, method)) => (Some(class.to_owned()), Some(method.to_owned())),
                    None => (None, Some(name)),
                },
                None => (None, None),
            };
            let frame = Frame {
                function: function.clone().map(owned),
                module: module.clone().map(owned),
                package: path.clone().map(owned),
                platform: Some(owned("java".into())),
                ..Frame::default()
            };
            let key = FrameKey {
                function,
                module,
                package: path,
                addr: None,
            };
            (key, frame)
        } else {
            let start = mapping.as_ref().and_then(|m| m.start).unwrap_or(0);
            let addr = pf.rel_pc.map(|pc| pc.wrapping_add(start));
            if let (Some(m), Some(p)) = (&mapping, &path) {
                self.image(seq, m, p)?;
            }
            let frame = Frame {
                function: function.clone().map(owned),
                package: path.clone().map(owned),
                instruction_addr: addr,
                platform: Some(owned("native".into())),
                ..Frame::default()
            };
            let key = FrameKey {
                function,
                module: None,
                package: path,
                addr,
            };
            (key, frame)
        };
        let index = match self.frame_index.get(&key) {
            Some(&i) => i,
            None => {
                let strings = [&key.function, &key.module, &key.package]
                    .iter()
                    .map(|s| s.as_ref().map_or(0, String::len))
                    .sum::<usize>();
                self.charge_result(2 * strings + 256)?;
                let i = self.frames.len();
                self.frames.push(frame);
                self.frame_index.insert(key, i);
                i
            }
        };
        if let Some(t) = self.sequences.get_mut(&seq) {
            t.resolved_frames.insert(iid, index);
        }
        Ok(Some(index))
    }

    /// A native mapping with a build id, once per path and start.
    fn image(&mut self, seq: u32, m: &proto::Mapping, path: &str) -> Result<(), ItemError> {
        let Some(build_id) = m
            .build_id
            .and_then(|id| self.sequences[&seq].build_ids.get(&id))
        else {
            return Ok(());
        };
        let Some(debug_id) = ids::debug_id_from_build_id(build_id) else {
            return Ok(());
        };
        let start = m.start.unwrap_or(0);
        if !self.seen_images.insert((path.to_owned(), start)) {
            return Ok(());
        }
        let code_id = hex::encode(build_id);
        self.charge_result(path.len() + code_id.len() + 256)?;
        self.images.push(DebugImage {
            image_type: Some(owned("symbolic".into())),
            code_file: Some(owned(path.to_owned())),
            debug_id: Some(owned(debug_id)),
            code_id: Some(owned(code_id)),
            image_addr: Some(start),
            image_vmaddr: m.load_bias,
            image_size: Some(m.end.unwrap_or(0).saturating_sub(start)),
            ..DebugImage::default()
        });
        Ok(())
    }
}

/// A mapping's path segments joined with `/`, as Relay joins them.
fn mapping_path(m: &proto::Mapping, tables: &Tables) -> Result<Option<String>, ItemError> {
    if m.path_string_ids.len() > MAX_PATH_SEGMENTS {
        return Err(too_large(format_args!(
            "a mapping path of {} segments (at most {MAX_PATH_SEGMENTS})",
            m.path_string_ids.len()
        )));
    }
    let mut path = String::new();
    for seg in m
        .path_string_ids
        .iter()
        .filter_map(|id| tables.mapping_paths.get(id))
    {
        if !path.is_empty() {
            path.push('/');
        }
        path.push_str(seg);
    }
    Ok((!path.is_empty()).then_some(path))
}

/// A mapping of the Android runtime: its frames are Java methods.
fn is_java_mapping(path: &str) -> bool {
    path.contains("dalvik-jit-code-cache")
        || [".oat", ".odex", ".vdex", ".jar", ".dex"]
            .iter()
            .any(|ext| path.ends_with(ext))
}
