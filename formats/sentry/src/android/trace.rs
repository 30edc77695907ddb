//! ART method traces (`Debug.startMethodTracingSampling`) <-> spans: the
//! stretches of time one thread spent in one stack.
//!
//! A trace records method enters and exits per thread. Replaying them gives
//! each thread's stack between two events; that stack and how long it held
//! is what a sampling profile states, so a span becomes one OTLP point
//! (timestamp, wall nanoseconds). Writing spans back emits, at each span's
//! start, the exits and enters that turn the thread's previous stack into
//! the span's, and exits everything where a thread's spans leave a gap.

use std::collections::HashMap;
use std::time::Duration;

use android_trace_log::chrono::{DateTime, Utc};
use android_trace_log::{Action, AndroidTraceLog, Clock, Event, Method, Thread, Time, Vm};
use base64::Engine;

use super::super::{ItemError, Reason};

/// One stretch of time a thread spent in one stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    pub thread: u16,
    /// Nanoseconds since the trace start.
    pub start_ns: u64,
    pub duration_ns: u64,
    /// Index into [`Spans::stacks`].
    pub stack: u32,
}

/// A trace's spans and the stacks they name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Spans {
    /// Method ids, outermost first.
    pub stacks: Vec<Vec<u32>>,
    pub spans: Vec<Span>,
}

/// Decodes the `sampled_profile` field: base64 (Sentry's Android SDK sends
/// it without padding; padded input is taken too) of an ART trace file.
pub fn decode(sampled_profile: &str) -> Result<AndroidTraceLog, ItemError> {
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let bytes = engine.decode(sampled_profile.trim()).map_err(|e| {
        ItemError::new(
            Reason::InvalidBase64Value,
            format!("sampled_profile is not base64: {e}"),
        )
    })?;
    android_trace_log::parse(&bytes).map_err(|e| {
        ItemError::new(
            Reason::InvalidSampledProfile,
            format!("sampled_profile is not an Android method trace: {e}"),
        )
    })
}

/// The `sampled_profile` field for a trace, as the Android SDK writes it.
pub fn encode(log: &AndroidTraceLog) -> String {
    // Writing into a vector cannot fail; `to_trace` keeps the log valid.
    let bytes = log.serialize().expect("trace serializes into memory");
    base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes)
}

/// Wall time since the trace start (CPU time where a trace has no wall clock).
fn event_ns(t: Time) -> u64 {
    let d = match t {
        Time::Global(d) => d,
        Time::Monotonic { wall: Some(d), .. } | Time::Monotonic { cpu: Some(d), .. } => d,
        Time::Monotonic { .. } => Duration::ZERO,
    };
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[derive(Default)]
struct ThreadState {
    stack: Vec<u32>,
    since: u64,
}

/// Replays the trace's events into spans. An exit of a method that is not
/// on the thread's stack (entered before tracing began) changes nothing;
/// an exit of one below the top also leaves the frames above it, as the
/// runtime unwinds them. Stacks still open at the end last until the
/// trace's elapsed time.
pub fn spans(log: &AndroidTraceLog) -> Spans {
    let mut out = Spans::default();
    let mut ids: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut threads: HashMap<u16, ThreadState> = HashMap::new();
    let mut emit = |out: &mut Spans, thread: u16, st: &ThreadState, end: u64| {
        if end <= st.since || st.stack.is_empty() {
            return;
        }
        let stack = match ids.get(st.stack.as_slice()) {
            Some(&i) => i,
            None => {
                let i = out.stacks.len() as u32;
                out.stacks.push(st.stack.clone());
                ids.insert(st.stack.clone(), i);
                i
            }
        };
        out.spans.push(Span {
            thread,
            start_ns: st.since,
            duration_ns: end - st.since,
            stack,
        });
    };
    for e in &log.events {
        let st = threads.entry(e.thread_id).or_default();
        // Clocks of one thread do not run back; a reading that does is
        // taken as no time passing.
        let t = event_ns(e.time).max(st.since);
        emit(&mut out, e.thread_id, st, t);
        st.since = t;
        match e.action {
            Action::Enter => st.stack.push(e.method_id),
            Action::Exit | Action::Unwind => {
                if let Some(pos) = st.stack.iter().rposition(|&m| m == e.method_id) {
                    st.stack.truncate(pos);
                }
            }
        }
    }
    let elapsed = u64::try_from(log.elapsed_time.as_nanos()).unwrap_or(u64::MAX);
    let mut open: Vec<_> = threads.into_iter().collect();
    open.sort_unstable_by_key(|(id, _)| *id);
    for (id, st) in &open {
        emit(&mut out, *id, st, elapsed.max(st.since));
    }
    out.spans.sort_unstable();
    out
}

/// What a written trace says besides its spans.
pub struct TraceInfo {
    pub start: DateTime<Utc>,
    pub pid: Option<u32>,
    pub threads: Vec<Thread>,
    /// Ids are what [`Spans::stacks`] hold.
    pub methods: Vec<Method>,
}

/// Writes spans as a trace with a wall clock (microseconds, the format's
/// resolution). Spans of a thread must not overlap; they may leave gaps.
pub fn to_trace(info: TraceInfo, spans: &Spans) -> AndroidTraceLog {
    let mut by_thread: Vec<&Span> = spans.spans.iter().collect();
    by_thread.sort_unstable_by_key(|s| (s.thread, s.start_ns));
    let mut events = Vec::with_capacity(by_thread.len() * 2);
    let mut enters = 0u64;
    let at = |ns: u64| Time::Monotonic {
        cpu: None,
        wall: Some(Duration::from_nanos(ns)),
    };
    let mut end = 0u64;
    let mut i = 0;
    while i < by_thread.len() {
        let thread = by_thread[i].thread;
        let mut cur: &[u32] = &[];
        let mut last_end = 0u64;
        while i < by_thread.len() && by_thread[i].thread == thread {
            let s = by_thread[i];
            let next = spans.stacks[s.stack as usize].as_slice();
            let mut keep = if s.start_ns > last_end {
                0
            } else {
                cur.iter().zip(next).take_while(|(a, b)| a == b).count()
            };
            // Two spans of one stack back to back (a method left and
            // entered again): the leaf leaves and enters, so that reading
            // the trace gives both spans again.
            if keep == cur.len() && keep == next.len() {
                keep = keep.saturating_sub(1);
            }
            let leave_at = if keep == 0 { last_end } else { s.start_ns };
            for &m in cur[keep..].iter().rev() {
                events.push(event(Action::Exit, thread, m, at(leave_at)));
            }
            for &m in &next[keep..] {
                events.push(event(Action::Enter, thread, m, at(s.start_ns)));
                enters += 1;
            }
            cur = next;
            last_end = s.start_ns.saturating_add(s.duration_ns);
            i += 1;
        }
        for &m in cur.iter().rev() {
            events.push(event(Action::Exit, thread, m, at(last_end)));
        }
        end = end.max(last_end);
    }
    // One timeline for all threads, each thread's own order kept.
    events.sort_by_key(|e| event_ns(e.time));
    AndroidTraceLog {
        data_file_overflow: false,
        clock: Clock::Wall,
        elapsed_time: Duration::from_nanos(end),
        total_method_calls: enters,
        clock_call_overhead: Duration::ZERO,
        vm: Vm::Art,
        start_time: info.start,
        pid: info.pid,
        gc_trace: None,
        threads: info.threads,
        methods: info.methods,
        events,
    }
}

pub(crate) fn event(action: Action, thread_id: u16, method_id: u32, time: Time) -> Event {
    Event {
        action,
        thread_id,
        method_id,
        time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(id: u32) -> Method {
        Method {
            id,
            name: format!("m{id}"),
            class_name: "com.example.App".into(),
            signature: "()V".into(),
            source_file: "App.java".into(),
            source_line: Some(id),
        }
    }

    fn info(threads: &[u16], methods: u32) -> TraceInfo {
        TraceInfo {
            start: DateTime::from_timestamp(1_700_000_000, 123_000_000).unwrap(),
            pid: Some(4242),
            threads: threads
                .iter()
                .map(|&id| Thread {
                    id,
                    name: format!("t{id}"),
                })
                .collect(),
            methods: (1..=methods).map(method).collect(),
        }
    }

    fn sp(thread: u16, start_us: u64, dur_us: u64, stack: u32) -> Span {
        Span {
            thread,
            start_ns: start_us * 1000,
            duration_ns: dur_us * 1000,
            stack,
        }
    }

    #[test]
    fn spans_survive_a_trip_through_the_binary_format() {
        let spans = Spans {
            stacks: vec![vec![1], vec![1, 2], vec![1, 2, 3], vec![4], vec![1, 3]],
            spans: vec![
                sp(7, 0, 10, 0),
                sp(7, 10, 10, 1),
                sp(7, 20, 5, 2),
                sp(7, 25, 10, 4),
                // A gap: the thread left every method, then entered 4.
                sp(7, 100, 10, 3),
                // The same stack again, back to back.
                sp(7, 110, 10, 3),
                sp(9, 3, 40, 2),
                sp(9, 43, 1, 0),
            ],
        };
        let log = to_trace(info(&[7, 9], 4), &spans);
        assert!(log.valid());
        let text = encode(&log);
        assert!(!text.ends_with('='), "Sentry's SDK sends no padding");
        let back = decode(&text).unwrap();
        assert_eq!(back.start_time, log.start_time);
        assert_eq!(back.elapsed_time, Duration::from_micros(120));
        let mut expected = spans.spans.clone();
        expected.sort_unstable();
        let got = spans_resolved(&super::spans(&back));
        assert_eq!(got, resolved(&spans.stacks, &expected));
    }

    fn resolved(stacks: &[Vec<u32>], spans: &[Span]) -> Vec<(u16, u64, u64, Vec<u32>)> {
        spans
            .iter()
            .map(|s| {
                (
                    s.thread,
                    s.start_ns,
                    s.duration_ns,
                    stacks[s.stack as usize].clone(),
                )
            })
            .collect()
    }

    fn spans_resolved(s: &Spans) -> Vec<(u16, u64, u64, Vec<u32>)> {
        resolved(&s.stacks, &s.spans)
    }

    #[test]
    fn replay_handles_exits_without_enters_and_unwinds() {
        let t = |us| Time::Monotonic {
            cpu: Some(Duration::from_micros(1)),
            wall: Some(Duration::from_micros(us)),
        };
        let mut log = to_trace(info(&[1], 3), &Spans::default());
        log.clock = Clock::Dual;
        log.elapsed_time = Duration::from_micros(50);
        log.events = vec![
            // Entered before tracing began.
            event(Action::Exit, 1, 3, t(0)),
            event(Action::Enter, 1, 1, t(5)),
            event(Action::Enter, 1, 2, t(10)),
            event(Action::Enter, 1, 3, t(12)),
            // An exception leaves 2 (and 3 above it) at once.
            event(Action::Unwind, 1, 2, t(20)),
        ];
        let got = spans_resolved(&spans(&log));
        assert_eq!(
            got,
            vec![
                (1, 5_000, 5_000, vec![1]),
                (1, 10_000, 2_000, vec![1, 2]),
                (1, 12_000, 8_000, vec![1, 2, 3]),
                // Open until the trace's end.
                (1, 20_000, 30_000, vec![1]),
            ]
        );
    }

    #[test]
    fn bad_payloads_get_relays_reasons() {
        assert_eq!(decode("**").unwrap_err().reason, Reason::InvalidBase64Value);
        let not_a_trace = base64::engine::general_purpose::STANDARD.encode(b"hello");
        assert_eq!(
            decode(&not_a_trace).unwrap_err().reason,
            Reason::InvalidSampledProfile
        );
    }
}
