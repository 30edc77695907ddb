//! What the tap saw, per pipeline: for each service and sample type the
//! folded stacks of the last windows, the rates, and the pipeline's
//! refusals. Bounded by `max_memory_mib` and held in the collector's memory
//! budget: past either, the oldest windows go first, then new stacks of
//! the current window fold into one frame ([`OVER_BOUND`]), so totals stay
//! right.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use profcol_model::memory::Reservation;

use super::fold::{Series, SeriesKey};

/// The frame new stacks fold into when the store is full.
pub const OVER_BOUND: &str = "[over profilez memory bound]";

/// What one stack costs beside its text: the map entry, its hash slot and
/// the allocator's rounding.
const STACK_OVERHEAD: usize = 64;

pub struct Store {
    window: Duration,
    windows: usize,
    max_bytes: usize,
    start: Instant,
    pipelines: BTreeMap<String, PipelineView>,
    /// What the windows' stacks take, as counted in `reservation`.
    bytes: usize,
    reservation: Reservation,
}

#[derive(Default)]
pub struct PipelineView {
    pub series: BTreeMap<SeriesKey, SeriesState>,
    /// By reason.
    pub refusals: BTreeMap<String, Refusals>,
}

pub struct Refusals {
    pub batches: u64,
    pub samples: u64,
    pub last: Instant,
}

pub struct SeriesState {
    pub producers: Vec<String>,
    pub last_seen: Instant,
    windows: VecDeque<Window>,
}

struct Window {
    /// Windows since the store started.
    index: u64,
    /// Samples seen, those skipped by the tap included.
    samples: u64,
    /// Samples of the batches folded: what the stacks' values count.
    folded: u64,
    bytes: u64,
    /// What its stacks take in the store.
    held: usize,
    stacks: HashMap<Box<str>, i64>,
}

/// A series' rates over the windows kept.
pub struct Rates {
    pub samples_per_sec: f64,
    pub bytes_per_sec: f64,
    pub samples: u64,
}

impl Store {
    pub fn new(
        window: Duration,
        windows: usize,
        max_bytes: usize,
        reservation: Reservation,
    ) -> Self {
        Self {
            window,
            windows,
            max_bytes,
            start: Instant::now(),
            pipelines: BTreeMap::new(),
            bytes: 0,
            reservation,
        }
    }

    /// The window `at` falls in.
    pub fn index(&self, at: Instant) -> u64 {
        self.index_back(at, Duration::ZERO)
    }

    /// The window of `back` before `at` (the first one, before the start).
    pub fn index_back(&self, at: Instant, back: Duration) -> u64 {
        let since = at
            .saturating_duration_since(self.start)
            .saturating_sub(back);
        (since.as_nanos() / self.window.as_nanos().max(1)) as u64
    }

    pub fn window(&self) -> Duration {
        self.window
    }

    pub fn windows(&self) -> usize {
        self.windows
    }

    /// What the stacks take now.
    pub fn held_bytes(&self) -> usize {
        self.bytes
    }

    pub fn pipelines(&self) -> &BTreeMap<String, PipelineView> {
        &self.pipelines
    }

    pub fn refused(&mut self, pipeline: &str, samples: u64, reason: &str, at: Instant) {
        let r = self
            .view(pipeline)
            .refusals
            .entry(reason.to_owned())
            .or_insert(Refusals {
                batches: 0,
                samples: 0,
                last: at,
            });
        r.batches += 1;
        r.samples += samples;
        r.last = at;
    }

    fn view(&mut self, pipeline: &str) -> &mut PipelineView {
        if !self.pipelines.contains_key(pipeline) {
            self.pipelines
                .insert(pipeline.to_owned(), PipelineView::default());
        }
        self.pipelines.get_mut(pipeline).expect("inserted above")
    }

    /// Adds one batch's stacks of a series, seen `at`, with its share of
    /// the batch's bytes; its `samples` stand for `seen` samples (those of
    /// batches skipped before it too).
    pub fn add(
        &mut self,
        pipeline: &str,
        key: SeriesKey,
        series: Series,
        seen: u64,
        bytes: u64,
        at: Instant,
    ) {
        let index = self.index(at);
        self.expire(index);
        let view = self.view(pipeline);
        let state = view
            .series
            .entry(key.clone())
            .or_insert_with(|| SeriesState {
                producers: Vec::new(),
                last_seen: at,
                windows: VecDeque::new(),
            });
        state.last_seen = at;
        for p in series.producers {
            if !state.producers.contains(&p) {
                state.producers.push(p);
            }
        }
        if state.windows.back().is_none_or(|w| w.index != index) {
            state.windows.push_back(Window {
                index,
                samples: 0,
                folded: 0,
                bytes: 0,
                held: 0,
                stacks: HashMap::new(),
            });
        }
        let w = state.windows.back_mut().expect("pushed above");
        w.samples += seen;
        w.folded += series.samples;
        w.bytes += bytes;
        for (stack, total) in series.stacks {
            if let Some(t) = self
                .window_of(pipeline, &key)
                .stacks
                .get_mut(stack.as_str())
            {
                *t = t.wrapping_add(total);
                continue;
            }
            let cost = stack.len() + STACK_OVERHEAD;
            let stack = if self.make_room(cost, index) {
                self.bytes += cost;
                self.window_of(pipeline, &key).held += cost;
                stack.into_boxed_str()
            } else {
                OVER_BOUND.into()
            };
            let w = self.window_of(pipeline, &key);
            match w.stacks.get_mut(&stack) {
                Some(t) => *t = t.wrapping_add(total),
                None => {
                    w.stacks.insert(stack, total);
                }
            }
        }
    }

    fn window_of(&mut self, pipeline: &str, key: &SeriesKey) -> &mut Window {
        self.pipelines
            .get_mut(pipeline)
            .and_then(|v| v.series.get_mut(key))
            .and_then(|s| s.windows.back_mut())
            .expect("the window being added to")
    }

    /// Room for `cost` more bytes, within `max_memory_mib` and the memory
    /// budget, evicting windows before `current`; false when there is none.
    fn make_room(&mut self, cost: usize, current: u64) -> bool {
        loop {
            let total = self.bytes + cost;
            if total <= self.max_bytes && self.reservation.try_grow_to(total).is_ok() {
                return true;
            }
            if !self.evict_oldest(current) {
                return false;
            }
        }
    }

    /// Drops the oldest window before `current` of any series.
    fn evict_oldest(&mut self, current: u64) -> bool {
        let oldest = self
            .pipelines
            .values_mut()
            .flat_map(|v| v.series.values_mut())
            .filter(|s| s.windows.front().is_some_and(|w| w.index < current))
            .min_by_key(|s| s.windows.front().map(|w| w.index));
        let Some(s) = oldest else { return false };
        let w = s.windows.pop_front().expect("filtered on it");
        self.bytes -= w.held;
        self.reservation.set(self.bytes);
        true
    }

    /// Drops windows that fell out of the `windows` kept.
    pub fn expire(&mut self, current: u64) {
        let keep = self.windows as u64;
        let mut freed = 0;
        for v in self.pipelines.values_mut() {
            for s in v.series.values_mut() {
                while s.windows.front().is_some_and(|w| w.index + keep <= current) {
                    freed += s.windows.pop_front().map_or(0, |w| w.held);
                }
            }
        }
        if freed > 0 {
            self.bytes -= freed;
            self.reservation.set(self.bytes);
        }
    }

    /// The stacks of a series summed over the windows `from..=to`.
    pub fn stacks(
        &self,
        pipeline: &str,
        key: &SeriesKey,
        from: u64,
        to: u64,
    ) -> Vec<(Box<str>, i64)> {
        let Some(s) = self.pipelines.get(pipeline).and_then(|v| v.series.get(key)) else {
            return Vec::new();
        };
        let mut sum: HashMap<&str, i64> = HashMap::new();
        for w in s.windows.iter().filter(|w| (from..=to).contains(&w.index)) {
            for (stack, t) in &w.stacks {
                let e = sum.entry(stack).or_insert(0);
                *e = e.wrapping_add(*t);
            }
        }
        sum.into_iter().map(|(s, t)| (s.into(), t)).collect()
    }

    /// The samples seen in a series' windows `from..=to`, and those of the
    /// batches folded (what its stacks count): fewer when the tap skipped
    /// batches.
    pub fn coverage(&self, pipeline: &str, key: &SeriesKey, from: u64, to: u64) -> (u64, u64) {
        let Some(s) = self.pipelines.get(pipeline).and_then(|v| v.series.get(key)) else {
            return (0, 0);
        };
        s.windows
            .iter()
            .filter(|w| (from..=to).contains(&w.index))
            .fold((0, 0), |(seen, folded), w| {
                (seen + w.samples, folded + w.folded)
            })
    }

    /// Rates over the windows kept, up to `now`.
    pub fn rates(&self, s: &SeriesState, now: Instant) -> Rates {
        let current = self.index(now);
        let keep = self.windows as u64;
        let kept = s.windows.iter().filter(|w| w.index + keep > current);
        let (mut samples, mut bytes, mut first) = (0, 0, current);
        for w in kept {
            samples += w.samples;
            bytes += w.bytes;
            first = first.min(w.index);
        }
        // From the start of the oldest window kept (or the store's start).
        let since = self.start + self.window * u32::try_from(first).unwrap_or(u32::MAX);
        let secs = now.saturating_duration_since(since).as_secs_f64().max(1.0);
        Rates {
            samples_per_sec: samples as f64 / secs,
            bytes_per_sec: bytes as f64 / secs,
            samples,
        }
    }
}
