//! Android payloads for tests, written with the trace format's own writer
//! (`android_trace_log`): a sampling-mode method trace as ART records one
//! (version 3, dual clock; at each sample tick the exits and enters that
//! turn a thread's last stack into its new one), in the chunk and legacy
//! profile JSON the Sentry Android SDK sends (sentry-java's
//! `ProfileChunk` and `ProfilingTraceData` keys).

use std::time::Duration;

use android_trace_log::chrono::DateTime;
use android_trace_log::{Action, AndroidTraceLog, Clock, Method, Thread, Time, Vm};
use serde_json::{json, Value};

use super::trace::{self, event};

/// Methods an app's threads run, as ART names them.
const METHODS: &[(&str, &str, &str, &str, Option<u32>)] = &[
    ("android.os.Looper", "loop", "()V", "Looper.java", Some(232)),
    (
        "android.os.Looper",
        "loopOnce",
        "(Landroid/os/Looper;JI)Z",
        "Looper.java",
        Some(205),
    ),
    (
        "android.os.MessageQueue",
        "next",
        "()Landroid/os/Message;",
        "MessageQueue.java",
        Some(335),
    ),
    (
        "android.os.MessageQueue",
        "nativePollOnce",
        "(JI)V",
        "MessageQueue.java",
        None,
    ),
    (
        "android.os.Handler",
        "dispatchMessage",
        "(Landroid/os/Message;)V",
        "Handler.java",
        Some(106),
    ),
    (
        "android.view.Choreographer",
        "doFrame",
        "(JI)V",
        "Choreographer.java",
        Some(1229),
    ),
    (
        "io.sentry.samples.android.MainActivity",
        "onCreate",
        "(Landroid/os/Bundle;)V",
        "MainActivity.kt",
        Some(58),
    ),
    (
        "io.sentry.samples.android.ProfilingActivity",
        "fibonacci",
        "(I)I",
        "ProfilingActivity.kt",
        Some(112),
    ),
    (
        "java.util.concurrent.ThreadPoolExecutor",
        "runWorker",
        "(Ljava/util/concurrent/ThreadPoolExecutor$Worker;)V",
        "ThreadPoolExecutor.java",
        Some(1145),
    ),
    ("java.lang.Thread", "run", "()V", "Thread.java", Some(1012)),
    (
        "okhttp3.internal.connection.RealCall",
        "execute",
        "()Lokhttp3/Response;",
        "RealCall.kt",
        Some(154),
    ),
    ("java.lang.Object", "wait", "(JI)V", "Object.java", None),
];

/// Thread ids and names of the traced process.
pub const THREADS: &[(u16, &str)] = &[
    (12021, "main"),
    (12035, "RenderThread"),
    (12048, "OkHttp Dispatcher"),
    (12050, "SentryExecutorServiceThreadFactory-0"),
];

/// Small deterministic generator: the same seed, the same trace.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

/// What a trace states, worked out as it is generated: per thread, each
/// stretch between two ticks with events, with its stack as
/// `class.method` names, outermost first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    pub thread: u16,
    /// Nanoseconds since the trace start.
    pub start_ns: u64,
    pub duration_ns: u64,
    pub stack: Vec<String>,
}

/// A sampling-mode trace of `ticks` samples `interval_us` apart over
/// [`THREADS`], started at `start_unix_us`, and its spans. Stacks stay open
/// at the end, as when the SDK stops the profiler.
pub fn sampled_trace(
    seed: u64,
    start_unix_us: i64,
    ticks: u32,
    interval_us: u64,
) -> (AndroidTraceLog, Vec<Expected>) {
    let mut rng = Lcg(seed);
    let methods: Vec<Method> = METHODS
        .iter()
        .enumerate()
        .map(|(i, (class, name, sig, file, line))| Method {
            // ART names methods by their (4-aligned) ArtMethod address.
            id: 0x11e0 + 4 * i as u32,
            name: (*name).into(),
            class_name: (*class).into(),
            signature: (*sig).into(),
            source_file: (*file).into(),
            source_line: *line,
        })
        .collect();
    let mut stacks: Vec<Vec<u32>> = vec![Vec::new(); THREADS.len()];
    let mut since = vec![0u64; THREADS.len()];
    let mut expected = Vec::new();
    let names = |stack: &[u32]| -> Vec<String> {
        stack
            .iter()
            .map(|&id| {
                let (class, name, ..) = METHODS[((id - 0x11e0) / 4) as usize];
                format!("{class}.{name}")
            })
            .collect()
    };
    let close = |expected: &mut Vec<Expected>, tid: u16, from: u64, to: u64, s: &[u32]| {
        if to > from && !s.is_empty() {
            expected.push(Expected {
                thread: tid,
                start_ns: from * 1000,
                duration_ns: (to - from) * 1000,
                stack: names(s),
            });
        }
    };
    let mut events = Vec::new();
    for tick in 0..ticks {
        let wall = u64::from(tick) * interval_us;
        for (t, &(tid, _)) in THREADS.iter().enumerate() {
            let stack = &mut stacks[t];
            // Some threads are idle between samples: no events at all.
            if !stack.is_empty() && rng.next(4) == 0 {
                continue;
            }
            let keep = if stack.is_empty() {
                0
            } else {
                1 + rng.next(stack.len() as u64) as usize
            };
            let pushes = rng.next(4);
            if !stack.is_empty() && keep == stack.len() && pushes == 0 {
                continue;
            }
            close(&mut expected, tid, since[t], wall, stack);
            since[t] = wall;
            let at = Time::Monotonic {
                cpu: Some(Duration::from_micros(wall * 3 / 5)),
                wall: Some(Duration::from_micros(wall)),
            };
            while stack.len() > keep {
                let m = stack.pop().unwrap();
                events.push(event(Action::Exit, tid, m, at));
            }
            // The first frame of every thread is its run loop.
            if stack.is_empty() {
                let root = methods[if t == 0 { 0 } else { 9 }].id;
                stack.push(root);
                events.push(event(Action::Enter, tid, root, at));
            }
            for _ in 0..pushes {
                let m = methods[rng.next(methods.len() as u64) as usize].id;
                stack.push(m);
                events.push(event(Action::Enter, tid, m, at));
            }
        }
    }
    let end = u64::from(ticks) * interval_us;
    for (t, &(tid, _)) in THREADS.iter().enumerate() {
        close(&mut expected, tid, since[t], end, &stacks[t]);
    }
    expected.sort();
    let log = AndroidTraceLog {
        data_file_overflow: false,
        clock: Clock::Dual,
        elapsed_time: Duration::from_micros(end),
        total_method_calls: events.len() as u64,
        clock_call_overhead: Duration::from_nanos(227),
        vm: Vm::Art,
        start_time: DateTime::from_timestamp_micros(start_unix_us).expect("start in range"),
        pid: Some(12021),
        gc_trace: None,
        threads: THREADS
            .iter()
            .map(|&(id, name)| Thread {
                id,
                name: name.into(),
            })
            .collect(),
        methods,
        events,
    };
    (log, expected)
}

/// The SDK's `client_sdk`.
pub fn client_sdk() -> Value {
    json!({"name": "sentry.java.android", "version": "8.13.2"})
}

/// A continuous-profiling `profile_chunk` payload for `log`.
pub fn chunk_json(log: &AndroidTraceLog, chunk_id: &str, profiler_id: &str) -> Value {
    json!({
        "profiler_id": profiler_id,
        "chunk_id": chunk_id,
        "client_sdk": client_sdk(),
        "measurements": {
            "frozen_frame_renders": {"unit": "nanosecond", "values": [
                {"value": 812_000_000.0, "timestamp": log.start_time.timestamp() as f64 + 0.5}
            ]}
        },
        "platform": "android",
        "release": "io.sentry.samples.android@8.13.2+1",
        "environment": "production",
        "version": "2",
        "sampled_profile": trace::encode(log),
        "timestamp": log.start_time.timestamp_micros() as f64 / 1e6,
    })
}

/// A legacy transaction `profile` payload for `log`, bound to the
/// transaction `event_id` of trace `trace_id`.
pub fn legacy_json(
    log: &AndroidTraceLog,
    profile_id: &str,
    event_id: &str,
    trace_id: &str,
) -> Value {
    let ns = log.elapsed_time.as_nanos() as u64;
    json!({
        "android_api_level": 34,
        "build_id": "0b6a7c4e-9bd1-4b4a-9b6c-2f1d3e4a5b6c",
        "device_cpu_frequencies": [1803, 1803, 2419, 2419],
        "device_is_emulator": false,
        "device_locale": "en_US",
        "device_manufacturer": "Google",
        "device_model": "Pixel 7",
        "device_os_build_number": "UQ1A.240205.004",
        "device_os_name": "android",
        "device_os_version": "14",
        "device_physical_memory_bytes": "7944077312",
        "duration_ns": ns.to_string(),
        "environment": "production",
        "platform": "android",
        "profile_id": profile_id,
        "sampled_profile": trace::encode(log),
        "timestamp": log.start_time.to_rfc3339(),
        "trace_id": trace_id,
        "transaction_id": event_id,
        "transaction_name": "MainActivity",
        "transactions": [{
            "active_thread_id": "12021",
            "id": event_id,
            "name": "MainActivity",
            "relative_cpu_end_ms": "0",
            "relative_cpu_start_ms": "0",
            "relative_end_ns": ns.to_string(),
            "relative_start_ns": "0",
            "trace_id": trace_id,
        }],
        "truncation_reason": "normal",
        "version_code": "1",
        "version_name": "8.13.2",
    })
}

/// The transaction event a legacy profile comes with.
pub fn transaction_json(event_id: &str, trace_id: &str, span_id: &str) -> Value {
    json!({
        "event_id": event_id,
        "type": "transaction",
        "transaction": "MainActivity",
        "release": "io.sentry.samples.android@8.13.2+1",
        "environment": "production",
        "platform": "java",
        "start_timestamp": 1_700_000_000.0,
        "timestamp": 1_700_000_002.0,
        "sdk": client_sdk(),
        "contexts": {"trace": {"trace_id": trace_id, "span_id": span_id, "op": "ui.load"}},
    })
}
