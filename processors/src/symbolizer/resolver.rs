//! The resolver shared by a processor's batches: a bounded result cache
//! per (binary, address), parsed debug files kept by recent use within
//! `max_debug_info_mib`, and worker threads that locate, parse and query
//! debug files for the addresses batches could not find in the cache. A
//! batch hands its misses over with a ticket and waits for it at most
//! `timeout`; what the workers finish later is there for the next batch.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hashbrown::HashMap;

use profcol_model::memory::Reservation;

use super::config::{Plan, SourceKind};
use super::debuginfod::{Debuginfod, Fetched, NegativeCache};
use super::elf::{self, BuildId, Companions, DebugInfo, Frame, Identity};
use super::names::Names;
use super::process;

/// A binary as a mapping names it.
#[derive(Debug, Clone)]
pub(super) struct Binary {
    pub id: BuildId,
    /// The cache key: the build id as text.
    pub key: Arc<str>,
    pub filename: Arc<str>,
    /// Where a mapping named by base name alone may be: the batch's
    /// `process.executable.path` values of that name.
    pub exe_paths: Vec<Arc<str>>,
    /// A Sentry debug image's `image_vmaddr` (0 when not sent): its
    /// frames' addresses are process addresses relative to the image.
    pub sentry_vmaddr: Option<u64>,
    /// With `process_files`: the `process.pid` of processes using it.
    pub pids: Vec<u32>,
}

/// An address as the producer sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Address {
    /// In the file's (link-time) address space: the eBPF profiler's.
    File(u64),
    /// An offset into the file (a process address minus the mapping's
    /// start plus its file offset): pprof's convention.
    Offset(u64),
}

pub(super) type Frames = Arc<[Frame]>;
type Key = (Arc<str>, Address);

/// Counters behind `otelcol_processor_symbolizer_*`.
#[derive(Default)]
pub(super) struct Stats {
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    pub resolved: AtomicU64,
    pub unresolved: AtomicU64,
    pub fetches: AtomicU64,
    pub fetch_failures: AtomicU64,
    pub load_failures: AtomicU64,
    pub queue_full: AtomicU64,
}

/// Results of two generations: a full current one becomes the old one,
/// whose entries move back on use; what is not used in two generations
/// goes. Approximately LRU at a hash lookup per query.
struct Results {
    cur: HashMap<Key, Frames>,
    old: HashMap<Key, Frames>,
    cur_bytes: usize,
    old_bytes: usize,
    cap: usize,
}

fn entry_bytes(frames: &[Frame]) -> usize {
    96 + frames
        .iter()
        .map(|f| f.name.len() + f.system_name.len() + f.file.len() + 3 * 16 + 8)
        .sum::<usize>()
}

impl Results {
    fn get(&mut self, key: &Key) -> Option<Frames> {
        if let Some(f) = self.cur.get(key) {
            return Some(f.clone());
        }
        let (k, f) = self.old.remove_entry(key)?;
        let b = entry_bytes(&f);
        self.old_bytes -= b;
        self.insert(k, f.clone());
        Some(f)
    }

    fn insert(&mut self, key: Key, frames: Frames) {
        if self.cur.len() * 2 >= self.cap {
            self.old = std::mem::take(&mut self.cur);
            self.old_bytes = std::mem::take(&mut self.cur_bytes);
        }
        self.cur_bytes += entry_bytes(&frames);
        if let Some(prev) = self.cur.insert(key, frames) {
            self.cur_bytes -= entry_bytes(&prev);
        }
    }

    fn bytes(&self) -> usize {
        self.cur_bytes + self.old_bytes
    }

    fn clear(&mut self) {
        *self = Results::new(self.cap);
    }

    fn new(cap: usize) -> Self {
        Self {
            cur: HashMap::new(),
            old: HashMap::new(),
            cur_bytes: 0,
            old_bytes: 0,
            cap: cap.max(2),
        }
    }
}

struct Loaded {
    info: Arc<DebugInfo>,
    last_use: u64,
}

struct State {
    results: Results,
    queue: VecDeque<Request>,
    queued_addrs: usize,
    loaded: HashMap<Arc<str>, Loaded>,
    loading: hashbrown::HashSet<Arc<str>>,
    negative: NegativeCache,
    tick: u64,
}

/// A batch's wait for its requests.
pub(super) struct Ticket {
    left: Mutex<usize>,
    done: Condvar,
}

impl Ticket {
    fn finish(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        *left = left.saturating_sub(1);
        if *left == 0 {
            self.done.notify_all();
        }
    }

    /// Waits until every request is handled or `deadline`.
    pub(super) fn wait(&self, deadline: Instant) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            left = self
                .done
                .wait_timeout(left, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

pub(super) struct Request {
    pub binary: Binary,
    pub addrs: Vec<Address>,
    ticket: Option<Arc<Ticket>>,
}

pub(super) struct Shared {
    plan: Arc<Plan>,
    state: Mutex<State>,
    work: Condvar,
    stop: AtomicBool,
    debuginfod: Option<Debuginfod>,
    /// Where debug files' companions (dwz, split DWARF) may be read.
    companions: Companions,
    pub stats: Stats,
    reservation: Mutex<Option<Reservation>>,
    /// Its own lock: a walk must not hold up the batches' cache lookups.
    names: Mutex<Names>,
    names_bytes: AtomicUsize,
}

/// Owns the workers; dropping it stops them.
pub(super) struct Resolver {
    pub shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// Addresses waiting for the workers, at most.
const MAX_QUEUED_ADDRS: usize = 100_000;

impl Resolver {
    pub(super) fn new(plan: Arc<Plan>) -> Self {
        let debuginfod =
            if plan.debuginfod_urls.is_empty() || !plan.sources.contains(&SourceKind::Debuginfod) {
                None
            } else {
                match Debuginfod::new(&plan) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        tracing::error!(error = %e, "symbolizer: debuginfod client not started");
                        None
                    }
                }
            };
        let companions = Companions {
            allowed: plan
                .allow_mapping_paths
                .iter()
                .cloned()
                .chain(
                    plan.debug_directories
                        .iter()
                        .filter_map(|d| std::fs::canonicalize(d).ok()),
                )
                .collect(),
            debug_directories: plan.debug_directories.clone(),
            exe: None,
        };
        let shared = Arc::new(Shared {
            companions,
            state: Mutex::new(State {
                results: Results::new(plan.cache_entries),
                queue: VecDeque::new(),
                queued_addrs: 0,
                loaded: HashMap::new(),
                loading: Default::default(),
                negative: NegativeCache::new(plan.negative_ttl, 10_000),
                tick: 0,
            }),
            plan,
            work: Condvar::new(),
            stop: AtomicBool::new(false),
            debuginfod,
            stats: Stats::default(),
            reservation: Mutex::new(None),
            names: Mutex::new(Names::default()),
            names_bytes: AtomicUsize::new(0),
        });
        let threads = (0..shared.plan.workers)
            .filter_map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("symbolizer-{i}"))
                    .spawn(move || s.work_loop())
                    .ok()
            })
            .collect();
        Self { shared, threads }
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        self.shared.work.notify_all();
        // Workers finish their current file; not joined: a download may
        // take up to its timeout and the pipeline must not wait for it.
        self.threads.clear();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn attach(&self, r: Reservation) {
        *self.reservation.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }

    /// Cached frames of each key, `None` for misses (counted).
    pub(super) fn lookup(&self, keys: &[(Arc<str>, Address)], out: &mut Vec<Option<Frames>>) {
        let mut st = self.lock();
        out.clear();
        let mut hits = 0;
        for k in keys {
            let f = st.results.get(k);
            hits += f.is_some() as u64;
            out.push(f);
        }
        self.stats.cache_hits.fetch_add(hits, Relaxed);
        self.stats
            .cache_misses
            .fetch_add(keys.len() as u64 - hits, Relaxed);
    }

    /// Cached frames of each key, not counted (a batch's second look).
    pub(super) fn lookup_quiet(&self, keys: &[(Arc<str>, Address)], out: &mut Vec<Option<Frames>>) {
        let mut st = self.lock();
        out.clear();
        out.extend(keys.iter().map(|k| st.results.get(k)));
    }

    /// Queues `requests`; the ticket finishes when all are handled. When
    /// the queue is full the rest is dropped (the next batch asks again).
    pub(super) fn submit(&self, requests: Vec<(Binary, Vec<Address>)>) -> Arc<Ticket> {
        let ticket = Arc::new(Ticket {
            left: Mutex::new(0),
            done: Condvar::new(),
        });
        let mut st = self.lock();
        let mut n = 0;
        for (binary, addrs) in requests {
            if st.queued_addrs + addrs.len() > MAX_QUEUED_ADDRS {
                self.stats.queue_full.fetch_add(addrs.len() as u64, Relaxed);
                continue;
            }
            st.queued_addrs += addrs.len();
            st.queue.push_back(Request {
                binary,
                addrs,
                ticket: Some(ticket.clone()),
            });
            n += 1;
        }
        *ticket.left.lock().unwrap_or_else(|e| e.into_inner()) = n;
        drop(st);
        self.work.notify_all();
        ticket
    }

    fn work_loop(self: Arc<Self>) {
        loop {
            let req = {
                let mut st = self.lock();
                loop {
                    if self.stop.load(Relaxed) {
                        return;
                    }
                    // Skip requests whose binary another worker is loading.
                    let pos = st
                        .queue
                        .iter()
                        .position(|r| !st.loading.contains(&r.binary.key));
                    if let Some(i) = pos {
                        let r = st.queue.remove(i).expect("position in queue");
                        st.queued_addrs -= r.addrs.len();
                        break r;
                    }
                    st = self
                        .work
                        .wait_timeout(st, Duration::from_millis(200))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            };
            self.handle(&req);
            if let Some(t) = &req.ticket {
                t.finish();
            }
            self.work.notify_all();
        }
    }

    fn handle(&self, req: &Request) {
        let key = req.binary.key.clone();
        let info = {
            let mut st = self.lock();
            st.tick += 1;
            let tick = st.tick;
            if let Some(l) = st.loaded.get_mut(&key) {
                l.last_use = tick;
                Some(l.info.clone())
            } else if st.negative.contains(&key, Instant::now()) {
                None
            } else {
                st.loading.insert(key.clone());
                drop(st);
                let found = self.locate(&req.binary);
                let mut st = self.lock();
                st.loading.remove(&key);
                match found {
                    Some(info) => {
                        let info = Arc::new(info);
                        if self.keep(&mut st, key.clone(), info.clone(), tick) {
                            Some(info)
                        } else {
                            self.stats.load_failures.fetch_add(1, Relaxed);
                            None
                        }
                    }
                    None => {
                        self.stats.load_failures.fetch_add(1, Relaxed);
                        st.negative.insert(key.to_string(), Instant::now());
                        None
                    }
                }
            }
        };
        let mut resolved = Vec::with_capacity(req.addrs.len());
        for &a in &req.addrs {
            let frames: Vec<Frame> = match &info {
                Some(info) => match file_address(&info.identity, a) {
                    Some(fa) => info.resolve(fa),
                    None => Vec::new(),
                },
                None => Vec::new(),
            };
            if frames.is_empty() {
                self.stats.unresolved.fetch_add(1, Relaxed);
            } else {
                self.stats.resolved.fetch_add(1, Relaxed);
            }
            resolved.push((a, Frames::from(frames)));
        }
        let mut st = self.lock();
        for (a, f) in resolved {
            st.results.insert((key.clone(), a), f);
        }
        self.trim(&mut st, &key);
    }

    /// Keeps a parsed file, evicting the least recently used ones to stay
    /// within `max_debug_info_mib` and the memory budget.
    fn keep(&self, st: &mut State, key: Arc<str>, info: Arc<DebugInfo>, tick: u64) -> bool {
        if info.bytes() > self.plan.max_debug_info_bytes {
            tracing::warn!(binary = %key, bytes = info.bytes(), "symbolizer: debug information over max_debug_info_mib");
            return false;
        }
        st.loaded.insert(
            key.clone(),
            Loaded {
                info,
                last_use: tick,
            },
        );
        self.trim(st, &key)
    }

    /// Evicts the least recently used files while those held (which grow
    /// as split DWARF units are read) pass `max_debug_info_mib` or the
    /// budget; `false` when `key` itself had to go.
    fn trim(&self, st: &mut State, key: &str) -> bool {
        loop {
            let over = loaded_bytes(st) > self.plan.max_debug_info_bytes || !self.account(st);
            if !over {
                return true;
            }
            let victim = st
                .loaded
                .iter()
                .min_by_key(|(_, l)| l.last_use)
                .map(|(k, _)| k.clone());
            let Some(v) = victim else { return false };
            st.loaded.remove(&v);
            if *v == *key {
                // Even alone it does not fit the budget: results too go.
                st.results.clear();
                self.account(st);
                return false;
            }
        }
    }

    /// Sizes the reservation to what the caches hold; `false` if the
    /// budget refuses.
    fn account(&self, st: &mut State) -> bool {
        let total = st.results.bytes()
            + loaded_bytes(st)
            + st.negative.bytes()
            + self.names_bytes.load(Relaxed);
        let mut r = self.reservation.lock().unwrap_or_else(|e| e.into_inner());
        match r.as_mut() {
            Some(r) if total > r.bytes() => r.try_grow_to(total).is_ok(),
            Some(r) => {
                r.set(total);
                true
            }
            None => true,
        }
    }

    /// Tries the sources in the configured order; the first file with
    /// DWARF wins, a binary with only symbols is the fallback.
    fn locate(&self, bin: &Binary) -> Option<DebugInfo> {
        let plan = &self.plan;
        let max = plan.max_file_bytes;
        let mapped = self.mapping_file(bin);
        let exe_identity = mapped.as_ref().map(|(_, id)| id.clone());
        let companions = Companions {
            exe: mapped.as_ref().map(|(p, _)| p.clone()),
            ..self.companions.clone()
        };
        let mut fallback: Option<DebugInfo> = None;
        // A debug file carries the GNU or Go build id of its executable,
        // not its htlhash (a hash of the executable's bytes): one named by
        // the mapping file's debuglink is taken as that file's.
        let linked_ok = matches!(bin.id, BuildId::Htl(_));
        let take = |path: &Path, fallback: &mut Option<DebugInfo>, linked: bool| {
            let mut info = match DebugInfo::load(path, max, &companions) {
                Ok(i) => i,
                Err(e) => {
                    tracing::debug!(path = %path.display(), error = %e, "symbolizer: file refused");
                    return None;
                }
            };
            if !(info.identity.matches(&bin.id) || linked && linked_ok) {
                tracing::debug!(path = %path.display(), "symbolizer: build id does not match");
                return None;
            }
            if let Some(exe) = &exe_identity {
                // The address space is the mapped file's.
                info.identity.loads = exe.loads.clone();
            }
            if info.has_dwarf() {
                return Some(info);
            }
            if fallback.as_ref().is_none_or(|f| !f.has_symbols()) && info.has_symbols() {
                *fallback = Some(info);
            }
            None
        };
        for source in &plan.sources {
            let found = match source {
                SourceKind::Mapping => mapped
                    .as_ref()
                    .and_then(|(p, _)| take(p, &mut fallback, false)),
                SourceKind::DebugDirectories => bin.id.hex().and_then(|hex| {
                    plan.debug_directories.iter().find_map(|d| {
                        let p = d
                            .join(".build-id")
                            .join(&hex[..2.min(hex.len())])
                            .join(format!("{}.debug", &hex[2.min(hex.len())..]));
                        p.is_file()
                            .then(|| take(&p, &mut fallback, false))
                            .flatten()
                    })
                }),
                SourceKind::Debuglink => mapped.as_ref().and_then(|(p, id)| {
                    let name = id.debuglink.as_deref()?;
                    debuglink_candidates(p, name, &plan.debug_directories)
                        .into_iter()
                        .find_map(|c| c.is_file().then(|| take(&c, &mut fallback, true)).flatten())
                }),
                // Not configured: on to the fallback (a `?` here would
                // return from `locate` without it).
                SourceKind::Debuginfod => match (self.debuginfod.as_ref(), bin.id.hex()) {
                    (Some(d), Some(hex)) => ["debuginfo", "executable"].into_iter().find_map(|kind| {
                        self.stats.fetches.fetch_add(1, Relaxed);
                        match d.fetch(&hex, kind) {
                            Fetched::File(p) => take(&p, &mut fallback, false),
                            Fetched::NotFound => None,
                            Fetched::Failed(e) => {
                                self.stats.fetch_failures.fetch_add(1, Relaxed);
                                tracing::warn!(error = %e, "symbolizer: debuginfod fetch failed");
                                None
                            }
                        }
                    }),
                    _ => None,
                },
            };
            if found.is_some() {
                return found;
            }
        }
        fallback
    }

    /// The file the mapping names, when inside `allow_mapping_paths` and
    /// of the mapping's build id. A mapping named by base name alone (the
    /// eBPF profiler's) is looked for as its process's executable, in its
    /// processes (`process_files`), then by that name under
    /// `allow_mapping_paths`.
    fn mapping_file(&self, bin: &Binary) -> Option<(PathBuf, Identity)> {
        if !self.plan.sources.contains(&SourceKind::Mapping)
            || (self.plan.allow_mapping_paths.is_empty() && self.plan.proc.is_none())
            || bin.filename.is_empty()
        {
            return None;
        }
        let matching = |p: PathBuf| -> Option<(PathBuf, Identity)> {
            let id = elf::identify(&p, self.plan.max_file_bytes).ok()?;
            id.matches(&bin.id).then_some((p, id))
        };
        let allowed = |p: &Path| -> Option<(PathBuf, Identity)> {
            let path = std::fs::canonicalize(p).ok()?;
            if !self
                .plan
                .allow_mapping_paths
                .iter()
                .any(|d| path.starts_with(d))
            {
                tracing::debug!(path = %path.display(), "symbolizer: mapping file outside allow_mapping_paths");
                return None;
            }
            matching(path)
        };
        if bin.filename.starts_with('/') {
            return allowed(Path::new(&*bin.filename));
        }
        if bin.filename.contains('/') {
            return None;
        }
        if let Some(found) = bin.exe_paths.iter().find_map(|p| allowed(Path::new(&**p))) {
            return Some(found);
        }
        // Through the process's root, not canonical: a container's path
        // resolved on the host would be the host's file.
        if let Some(proc) = &self.plan.proc {
            let found = process::files_named(proc, &bin.pids, &bin.filename)
                .into_iter()
                .find_map(matching);
            if found.is_some() {
                return found;
            }
        }
        if self.plan.allow_mapping_paths.is_empty() {
            return None;
        }
        let candidates = {
            let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
            let found = names.find(
                &self.plan.allow_mapping_paths,
                &bin.filename,
                Instant::now(),
            );
            self.names_bytes.store(names.bytes(), Relaxed);
            found
        };
        candidates.iter().find_map(|p| allowed(p))
    }
}

/// Bytes of the parsed files held.
fn loaded_bytes(st: &State) -> usize {
    st.loaded.values().map(|l| l.info.bytes()).sum()
}

/// Where GDB looks for a `.gnu_debuglink` file of `exe`.
fn debuglink_candidates(exe: &Path, name: &str, debug_dirs: &[PathBuf]) -> Vec<PathBuf> {
    // A debuglink is a file name, never a path.
    if name.contains('/') || name == ".." || name.is_empty() {
        return Vec::new();
    }
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    let mut out = vec![dir.join(name), dir.join(".debug").join(name)];
    for d in debug_dirs {
        out.push(d.join(dir.strip_prefix("/").unwrap_or(dir)).join(name));
    }
    out
}

/// The file address of `a` through the file's segments.
fn file_address(id: &Identity, a: Address) -> Option<u64> {
    match a {
        Address::File(v) => Some(v),
        Address::Offset(off) => id.vaddr_of_offset(off),
    }
}
