//! Processor `symbolizer`: names native frames. The OpenTelemetry eBPF
//! profiler sends native (C, C++, Rust) frames as a mapping (file name,
//! build ids) plus an address in the file's link-time address space
//! (return addresses already minus one); pprof converters send process
//! addresses with the mapping's start and file offset. Each such location
//! without lines gets the functions at its address, inlined ones first,
//! with file and line, from debug files found by build id (see
//! `resolver`). A batch waits for what is not cached at most `timeout`.
//! Kernel frames sent as addresses are named by the host's kallsyms
//! (`kernel_symbols`, see `kallsyms`).

mod config;
mod debuginfod;
mod elf;
mod kallsyms;
mod names;
mod process;
mod resolver;

#[cfg(test)]
mod tests;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use profcol_model::dictionary::{Interner, Lookup};
use profcol_model::proto::{
    any_value::Value as A, AnyValue, Function, Line, ProfilesData, ProfilesDictionary,
    ResourceProfiles,
};
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{
    ProcessContext, Processor, ProcessorFactory, ProcessorStart, Verdict,
};
use profcol_pipeline::config::{ComponentConfig, ConfigErrors};
use profcol_pipeline::telemetry::Telemetry;

use config::Plan;
pub use config::SymbolizerConfig;
use elf::BuildId;
pub use elf::Frame;
use resolver::{Address, Binary, Frames, Resolver};

pub struct SymbolizerFactory;

impl ProcessorFactory for SymbolizerFactory {
    fn type_name(&self) -> &'static str {
        "symbolizer"
    }

    fn create(&self, cfg: &ComponentConfig) -> Result<Box<dyn Processor>, ConfigErrors> {
        let (_, plan) = cfg.decode_checked(|c: &SymbolizerConfig| c.compile(cfg))?;
        Ok(Box::new(Symbolizer::new(plan)))
    }
}

pub fn factory() -> Arc<dyn ProcessorFactory> {
    Arc::new(SymbolizerFactory)
}

pub struct Symbolizer {
    plan: Arc<Plan>,
    resolver: Resolver,
    telemetry: Option<Arc<Telemetry>>,
    id: String,
    /// The counters as last published.
    published: [u64; 8],
    /// Reused per batch.
    keys: Vec<(Arc<str>, Address)>,
    found: Vec<Option<Frames>>,
    /// Read at start with `kernel_symbols`, held in the memory budget.
    kernel: Option<(kallsyms::Kallsyms, profcol_model::memory::Reservation)>,
}

const GNU: &str = "process.executable.build_id.gnu";
const GO: &str = "process.executable.build_id.go";
const HTLHASH: &str = "process.executable.build_id.htlhash";
/// `htlhash`'s name in semantic conventions before 1.30.
const HTLHASH_OLD: &str = "process.executable.build_id.profiling";
const FRAME_TYPE: &str = "profile.frame.type";
const EXECUTABLE_PATH: &str = "process.executable.path";
const PID: &str = "process.pid";
/// What the `sentry` receiver marks a Sentry debug image's mapping with.
const SENTRY_IMAGE_TYPE: &str = "sentry.image_type";
const SENTRY_IMAGE_VMADDR: &str = "sentry.image_vmaddr";

impl Symbolizer {
    fn new(plan: Plan) -> Self {
        let plan = Arc::new(plan);
        Self {
            resolver: Resolver::new(plan.clone()),
            plan,
            telemetry: None,
            id: String::new(),
            published: [0; 8],
            keys: Vec::new(),
            found: Vec::new(),
            kernel: None,
        }
    }

    fn publish(&mut self) {
        let s = &self.resolver.shared.stats;
        let now = [
            ("cache_hits", &s.cache_hits),
            ("cache_misses", &s.cache_misses),
            ("frames_resolved", &s.resolved),
            ("frames_unresolved", &s.unresolved),
            ("fetches", &s.fetches),
            ("fetch_failures", &s.fetch_failures),
            ("load_failures", &s.load_failures),
            ("queue_full", &s.queue_full),
        ];
        for (i, (what, c)) in now.into_iter().enumerate() {
            let v = c.load(Relaxed);
            if let Some(t) = &self.telemetry {
                if v > self.published[i] {
                    t.symbolizer(&self.id, what, v - self.published[i]);
                }
            }
            self.published[i] = v;
        }
    }
}

/// What a batch's dictionary says about one mapping.
fn binary_of(
    dict: &ProfilesDictionary,
    mapping: usize,
    exe_paths: &[Arc<str>],
    pids: Option<&Vec<u32>>,
) -> Option<Binary> {
    let m = dict.mapping_table.get(mapping)?;
    let s = |i: i32| dict.string_table.get(i as usize).map(String::as_str);
    let (mut id, mut htl) = (None, None);
    let (mut sentry, mut vmaddr) = (false, 0);
    for &a in &m.attribute_indices {
        let Some(kv) = dict.attribute_table.get(a as usize) else {
            continue;
        };
        let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
        match (s(kv.key_strindex), value) {
            (Some(SENTRY_IMAGE_TYPE), _) => sentry = true,
            (Some(SENTRY_IMAGE_VMADDR), Some(&A::IntValue(v))) => vmaddr = v as u64,
            _ => {}
        }
        let Some(A::StringValue(v)) = value else {
            continue;
        };
        match s(kv.key_strindex) {
            Some(GNU) => id = parse_hex(v).map(BuildId::Gnu).or(id),
            Some(GO) if id.is_none() && !v.is_empty() => id = Some(BuildId::Go(v.clone())),
            Some(HTLHASH | HTLHASH_OLD) => {
                htl = parse_hex(v)
                    .and_then(|b| <[u8; 16]>::try_from(b).ok())
                    .map(BuildId::Htl)
            }
            _ => {}
        }
    }
    // A GNU or Go build id names debug files too; the htlhash only the
    // file itself.
    let id = id.or(htl)?;
    let key: Arc<str> = match &id {
        BuildId::Gnu(_) => id.hex()?.into(),
        BuildId::Go(g) => format!("go:{g}").into(),
        BuildId::Htl(h) => format!("htl:{}", hex::encode(h)).into(),
    };
    let filename: Arc<str> = s(m.filename_strindex).unwrap_or("").into();
    let exe_paths = exe_paths
        .iter()
        .filter(|p| !filename.is_empty() && p.rsplit('/').next() == Some(&*filename))
        .cloned()
        .collect();
    Some(Binary {
        id,
        key,
        filename,
        exe_paths,
        sentry_vmaddr: sentry.then_some(vmaddr),
        pids: pids.cloned().unwrap_or_default(),
    })
}

/// A GNU build id as hex; at most 64 bytes (forged ids are refused).
fn parse_hex(v: &str) -> Option<Vec<u8>> {
    if v.is_empty() || !v.len().is_multiple_of(2) || v.len() > 128 {
        return None;
    }
    (0..v.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(v.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The batch's `process.executable.path` values: the eBPF profiler names a
/// mapping's file by its base name, its process's executable by path.
fn executables(data: &ProfilesData) -> Vec<Arc<str>> {
    let lookup = Lookup::of(data);
    let mut out: Vec<Arc<str>> = Vec::new();
    for rp in &data.resource_profiles {
        let path = resource_attr(&lookup, rp, EXECUTABLE_PATH).and_then(|v| lookup.str_value(v));
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            if !out.iter().any(|o| **o == *p) {
                out.push(p.into());
            }
        }
    }
    out
}

/// The value of `rp`'s resource attribute `key`.
fn resource_attr<'a>(
    lookup: &Lookup<'a>,
    rp: &'a ResourceProfiles,
    key: &str,
) -> Option<&'a AnyValue> {
    let attrs = &rp.resource.as_ref()?.attributes;
    attrs
        .iter()
        .find(|kv| lookup.key_of(kv) == key)?
        .value
        .as_ref()
}

/// Per mapping, the `process.pid` of the resources whose samples use it
/// (at most [`process::MAX_PIDS`]); each stack is walked once per resource.
fn mapping_pids(data: &ProfilesData) -> Vec<Vec<u32>> {
    let lookup = Lookup::of(data);
    let mut out = vec![Vec::new(); lookup.dictionary().mapping_table.len()];
    let mut seen = hashbrown::HashSet::new();
    for rp in &data.resource_profiles {
        let pid = match resource_attr(&lookup, rp, PID).and_then(|v| v.value.as_ref()) {
            Some(A::IntValue(p)) => u32::try_from(*p).ok(),
            _ => None,
        };
        let Some(pid) = pid.filter(|&p| p > 0) else {
            continue;
        };
        seen.clear();
        let samples = rp
            .scope_profiles
            .iter()
            .flat_map(|sp| &sp.profiles)
            .flat_map(|p| &p.samples);
        for s in samples {
            if !seen.insert(s.stack_index) {
                continue;
            }
            for &li in &lookup.stack(s.stack_index).location_indices {
                let m = lookup.location(li).mapping_index;
                if let Some(v) = usize::try_from(m).ok().and_then(|m| out.get_mut(m)) {
                    if v.len() < process::MAX_PIDS && !v.contains(&pid) {
                        v.push(pid);
                    }
                }
            }
        }
    }
    out
}

/// Per location, whether a stack has it innermost (first).
fn leaf_locations(dict: &ProfilesDictionary) -> Vec<bool> {
    let mut leaf = vec![false; dict.location_table.len()];
    for s in &dict.stack_table {
        if let Some(l) = s
            .location_indices
            .first()
            .and_then(|&i| leaf.get_mut(i as usize))
        {
            *l = true;
        }
    }
    leaf
}

/// The location's `profile.frame.type`, if set.
fn frame_type<'a>(dict: &'a ProfilesDictionary, attrs: &[i32]) -> Option<&'a str> {
    attrs.iter().find_map(|&a| {
        let kv = dict.attribute_table.get(a as usize)?;
        if dict.string_table.get(kv.key_strindex as usize)? != FRAME_TYPE {
            return None;
        }
        match kv.value.as_ref()?.value.as_ref()? {
            A::StringValue(v) => Some(v.as_str()),
            _ => None,
        }
    })
}

impl Processor for Symbolizer {
    fn process(&mut self, batch: &mut ProfileBatch, ctx: &mut ProcessContext) -> Verdict {
        let exe_paths = executables(batch.data());
        let pids = match self.plan.proc {
            Some(_) => mapping_pids(batch.data()),
            None => Vec::new(),
        };
        let data = batch.data_mut();
        let Some(dict) = data.dictionary.as_mut() else {
            return Verdict::Keep;
        };
        // Per mapping, once: its binary (None: nothing to look up by).
        let mut binaries: Vec<Option<Option<Binary>>> = vec![None; dict.mapping_table.len()];
        // Locations some stack ends in, once a Sentry image needs them.
        let mut leaves: Option<Vec<bool>> = None;
        let mut todo = Vec::new();
        let mut kernel: Vec<(usize, Frames)> = Vec::new();
        self.keys.clear();
        for (li, loc) in dict.location_table.iter().enumerate() {
            if !loc.lines.is_empty() {
                continue;
            }
            let typed = match frame_type(dict, &loc.attribute_indices) {
                Some("kernel") if self.kernel.is_some() => {
                    let (k, _) = self.kernel.as_ref().expect("checked");
                    if let Some(f) = k.lookup(loc.address) {
                        kernel.push((li, f.clone()));
                    }
                    continue;
                }
                // Semantic conventions' `rust` (a Sentry Rust SDK's frames).
                Some("native" | "kernel" | "rust") => true,
                Some(_) => continue,
                None if self.plan.untyped_locations => false,
                None => continue,
            };
            if loc.mapping_index <= 0 {
                continue;
            }
            let mi = loc.mapping_index as usize;
            let Some(slot) = binaries.get_mut(mi) else {
                continue;
            };
            let Some(bin) =
                slot.get_or_insert_with(|| binary_of(dict, mi, &exe_paths, pids.get(mi)))
            else {
                continue;
            };
            let m = &dict.mapping_table[mi];
            let address = match (bin.sentry_vmaddr, typed) {
                // A Sentry SDK's instruction_addr is the process's: less
                // image_addr (the mapping's start) plus image_vmaddr, the
                // file's address, as symbolicator takes it.
                // A caller's address is where its call returns to: one
                // back is the call, as symbolicator adjusts it.
                (Some(vmaddr), _) => match loc.address.checked_sub(m.memory_start) {
                    Some(d) => {
                        let leaves = leaves.get_or_insert_with(|| leaf_locations(dict));
                        let caller = !leaves.get(li).copied().unwrap_or(true);
                        Address::File(d.saturating_add(vmaddr).saturating_sub(caller.into()))
                    }
                    None => continue,
                },
                (None, true) => Address::File(loc.address),
                (None, false) => match loc.address.checked_sub(m.memory_start) {
                    Some(d) => Address::Offset(d.saturating_add(m.file_offset)),
                    None => continue,
                },
            };
            todo.push((li, bin.clone()));
            self.keys.push((bin.key.clone(), address));
        }
        if todo.is_empty() && kernel.is_empty() {
            self.publish();
            return Verdict::Keep;
        }
        let shared = self.resolver.shared.clone();
        shared.lookup(&self.keys, &mut self.found);
        let misses: Vec<usize> = (0..todo.len())
            .filter(|&i| self.found[i].is_none())
            .collect();
        if !misses.is_empty() {
            let mut per_binary: hashbrown::HashMap<Arc<str>, (Binary, Vec<Address>)> =
                hashbrown::HashMap::new();
            for &i in &misses {
                let (key, addr) = &self.keys[i];
                let e = per_binary
                    .entry(key.clone())
                    .or_insert_with(|| (todo[i].1.clone(), Vec::new()));
                if !e.1.contains(addr) {
                    e.1.push(*addr);
                }
            }
            let ticket = shared.submit(per_binary.into_values().collect());
            if !self.plan.timeout.is_zero() {
                ticket.wait(Instant::now() + self.plan.timeout);
                let keys: Vec<_> = misses.iter().map(|&i| self.keys[i].clone()).collect();
                let mut again = Vec::new();
                shared.lookup_quiet(&keys, &mut again);
                for (&i, f) in misses.iter().zip(again) {
                    self.found[i] = f;
                }
            }
        }
        let mut at: Vec<usize> = todo.iter().map(|(li, _)| *li).collect();
        for (li, f) in kernel {
            at.push(li);
            self.found.push(Some(f));
        }
        let written = write_lines(dict, &at, &self.found);
        ctx.event("symbolizer_locations_symbolized", written);
        self.publish();
        Verdict::Keep
    }

    fn start(&mut self, ctx: &ProcessorStart<'_>) {
        self.id = ctx.id.to_string();
        self.telemetry = Some(ctx.telemetry.clone());
        if let Ok(r) = ctx.budget.try_admit(0) {
            self.resolver.shared.attach(r);
        }
        if let Some(path) = &self.plan.kallsyms {
            let loaded = kallsyms::Kallsyms::load(path).and_then(|k| {
                match ctx.budget.try_admit(k.heap_bytes()) {
                    Ok(m) => Ok((k, m)),
                    Err(e) => Err(format!(
                        "the memory budget has no room for its {} bytes",
                        e.wanted
                    )),
                }
            });
            match loaded {
                Ok((k, m)) => {
                    tracing::info!(processor = %self.id, symbols = k.len(), path = %path.display(), "kernel symbols read");
                    self.kernel = Some((k, m));
                }
                Err(e) => {
                    tracing::warn!(processor = %self.id, error = %e, "kernel_symbols: kernel frames stay unnamed");
                }
            }
        }
    }
}

/// Writes the frames found as lines of their locations, interning names
/// and files in the dictionary; returns the locations written.
fn write_lines(
    dict: &mut ProfilesDictionary,
    locations: &[usize],
    found: &[Option<Frames>],
) -> u64 {
    if found
        .iter()
        .all(|f| f.as_ref().is_none_or(|f| f.is_empty()))
    {
        return 0;
    }
    let mut strings = Interner::from_values(std::mem::take(&mut dict.string_table));
    let mut functions = Interner::from_values(std::mem::take(&mut dict.function_table));
    let mut written = 0;
    for (li, frames) in locations.iter().zip(found) {
        let Some(frames) = frames.as_ref().filter(|f| !f.is_empty()) else {
            continue;
        };
        let mut str_of = |s: &str| strings.intern_by(s, |a: &String, b| a == b, str::to_string);
        let lines = frames
            .iter()
            .map(|f| {
                let function = Function {
                    name_strindex: str_of(&f.name),
                    system_name_strindex: str_of(&f.system_name),
                    filename_strindex: str_of(&f.file),
                    start_line: 0,
                };
                Line {
                    function_index: functions.intern(function),
                    line: i64::from(f.line),
                    column: i64::from(f.column),
                }
            })
            .collect();
        dict.location_table[*li].lines = lines;
        written += 1;
    }
    dict.string_table = strings.into_values();
    dict.function_table = functions.into_values();
    written
}

/// For benches and tests: a processor on `yaml` (no telemetry).
#[doc(hidden)]
pub fn from_yaml(yaml: &str) -> Result<Box<dyn Processor>, String> {
    let cfg = ComponentConfig::from_yaml(
        profcol_pipeline::config::Kind::Processor,
        "symbolizer",
        yaml,
    )
    .map_err(|e| e.to_string())?;
    SymbolizerFactory.create(&cfg).map_err(|e| e.to_string())
}

/// For the fuzz target: `bytes` as a debug file (written to `dir`), each
/// of `addrs` resolved; the frames found. Never panics on any input.
#[doc(hidden)]
pub fn resolve_file_bytes(dir: &std::path::Path, bytes: &[u8], addrs: &[u64]) -> usize {
    let path = dir.join("input.debug");
    if std::fs::write(&path, bytes).is_err() {
        return 0;
    }
    match elf::DebugInfo::load(&path, 64 << 20, &elf::Companions::default()) {
        Ok(info) => addrs.iter().map(|&a| info.resolve(a).len()).sum(),
        Err(_) => 0,
    }
}
