//! OTLP stacks as Sentry frames and stacks, profile-wide: a Location
//! becomes one frame per Line (inlined first), a stack the frames of its
//! Locations, leaf first. Chunks take the parts their samples use.

use std::borrow::Cow;

use hashbrown::HashMap;

use super::address;
use super::dict::{attr_text, entry, nonempty};
use crate::keys as k;
use crate::v2::outgoing::ChunkFrame;
use profcol_model::dictionary::Lookup;
use profcol_model::proto::any_value::Value;

/// The profile's frames and stacks, each interned once.
pub(super) struct Frames<'d> {
    dict: Lookup<'d>,
    frames: Vec<ChunkFrame>,
    frame_ids: HashMap<ChunkFrame, u32>,
    /// Per Location: its frames, as a range of `loc_scratch`.
    location_frames: HashMap<i32, (u32, u32)>,
    loc_scratch: Vec<u32>,
    /// Frame ids per Sentry stack.
    pub stacks: Vec<Vec<u32>>,
    stack_ids: HashMap<Vec<u32>, u32>,
    otlp_stacks: HashMap<i32, u32>,
    /// Locations per runtime (from `profile.frame.type`), in order of first
    /// appearance: the most common runtime names the chunk's platform.
    runtimes: Vec<(&'static str, u32)>,
    /// Per frame id: the runtime its location's frame type names.
    frame_runtimes: Vec<Option<&'static str>>,
    /// Per frame id: the mappings of the locations it stands for.
    pub frame_mappings: Vec<Vec<i32>>,
    /// Mappings whose frames were placed in a region of their own
    /// (see [`address`]).
    pub placed: hashbrown::HashSet<i32>,
}

impl<'d> Frames<'d> {
    pub(super) fn new(dict: Lookup<'d>) -> Self {
        Self {
            dict,
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            location_frames: HashMap::new(),
            loc_scratch: Vec::new(),
            stacks: Vec::new(),
            stack_ids: HashMap::new(),
            otlp_stacks: HashMap::new(),
            runtimes: Vec::new(),
            frame_runtimes: Vec::new(),
            frame_mappings: Vec::new(),
            placed: hashbrown::HashSet::new(),
        }
    }

    /// Sentry frames of one Location: one per Line (inlined first, leaf first).
    fn location_frames(&mut self, loc_index: i32) -> (u32, u32) {
        if let Some(&r) = self.location_frames.get(&loc_index) {
            return r;
        }
        let d = self.dict;
        let loc = entry(&d.dictionary().location_table, loc_index);
        let mut ids = Vec::new();
        if let Some(loc) = loc {
            let la = &loc.attribute_indices[..];
            let text = |key| attr_text(d, la, key);
            let in_app = d
                .attribute_value(la, k::SENTRY_IN_APP)
                .and_then(|v| match v.value {
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
            let mut addr =
                (loc.address != 0 && runtime.is_none_or(is_machine_code)).then_some(loc.address);
            if addr.is_some() && address::in_file_space(d, loc, text(k::FRAME_TYPE).as_deref()) {
                addr = address::region(loc.mapping_index).and_then(|r| r.checked_add(loc.address));
                self.placed.insert(loc.mapping_index);
            }
            // An unsymbolized native frame (eBPF, perf): its image names it,
            // in `package`. Relay's `Frame` has no `package` and drops it,
            // which would leave Sentry only an address: the file's name goes
            // in `module` too.
            let package = package.or_else(|| {
                let m = usize::try_from(loc.mapping_index)
                    .ok()
                    .filter(|&i| i > 0 && loc.lines.is_empty())
                    .and_then(|i| d.dictionary().mapping_table.get(i))?;
                let file = nonempty(Some(Cow::Borrowed(d.string(m.filename_strindex))))?;
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
                let f = entry(&d.dictionary().function_table, line.function_index);
                let (name, file) = match f {
                    Some(f) => {
                        let name = d.string(f.name_strindex);
                        let name = if name.is_empty() {
                            d.string(f.system_name_strindex)
                        } else {
                            name
                        };
                        let file = d.string(f.filename_strindex);
                        let name = sdk_method_name(runtime, name, file);
                        (nonempty(Some(Cow::Borrowed(name))), file)
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
    pub(super) fn frame_runtime(&self) -> Option<&'static str> {
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
    pub(super) fn chunk_frame(&self, f: u32, platform: &str) -> ChunkFrame {
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
    pub(super) fn stack(&mut self, stack_index: i32) -> u32 {
        if let Some(&s) = self.otlp_stacks.get(&stack_index) {
            return s;
        }
        let locs: Vec<i32> = self.dict.stack(stack_index).location_indices.clone();
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

/// sentry-java names a JVM method alone, its class in `filename`; the
/// receiver names the function `class.method` (`jvm_method_name` in
/// `otlp_builder`), as other JVM profilers do. Sentry gets the SDK's form
/// back: the method alone where the name is the filename, a dot and a
/// method.
fn sdk_method_name<'a>(runtime: Option<&str>, name: &'a str, file: &str) -> &'a str {
    match name.strip_prefix(file).and_then(|m| m.strip_prefix('.')) {
        Some(method)
            if runtime == Some("java")
                && !file.is_empty()
                && !method.is_empty()
                && !method.contains('.') =>
        {
            method
        }
        _ => name,
    }
}
