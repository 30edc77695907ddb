use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use profcol_model::memory::MemoryBudget;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::Observer;
use profcol_pipeline::config::{ComponentConfig, Kind};

use super::fold::{fold, Series, SeriesKey};
use super::store::{Store, OVER_BOUND};
use super::tap::{Shared, Tap};
use super::*;

fn create(yaml: &str) -> Result<ProfilezConfig, String> {
    let cfg =
        ComponentConfig::from_yaml(Kind::Extension, "profilez", yaml).map_err(|e| e.to_string())?;
    ProfilezFactory.create(&cfg).map_err(|e| e.to_string())?;
    cfg.decode().map_err(|e| e.to_string())
}

#[test]
fn decodes_defaults_and_names_every_bad_key() {
    assert_eq!(create("{}").unwrap(), ProfilezConfig::default());
    let c = create("endpoint: 127.0.0.1:0\nwindow: 10s\nwindows: 6\nmax_memory_mib: 8\nqueue_size: 4\nauth: {authenticator: bearertokenauth}").unwrap();
    assert_eq!(c.window.get(), Duration::from_secs(10));
    assert_eq!((c.windows, c.max_memory_mib, c.queue_size), (6, 8, 4));
    assert_eq!(c.auth.unwrap().authenticator, "bearertokenauth");
    assert_eq!(
        create("window: 10ms\nwindows: 0\nmax_memory_mib: 0\nqueue_size: 0\nmax_cpu_share: 0\nendpoint: x\nwindw: 1s").unwrap_err(),
        "extensions::profilez: unknown field \"windw\", expected one of \"endpoint\", \"tls\", \"auth\", \"window\", \"windows\", \"max_memory_mib\", \"queue_size\", \"max_cpu_share\"\n\
         extensions::profilez::endpoint: invalid endpoint \"x\": expected host:port\n\
         extensions::profilez::window: must be at least 1s, got 10ms\n\
         extensions::profilez::windows: must be between 1 and 1440, got 0\n\
         extensions::profilez::max_memory_mib: must be at least 1\n\
         extensions::profilez::queue_size: must be at least 1\n\
         extensions::profilez::max_cpu_share: must be above 0 and at most 1, got 0"
    );
}

fn series(stacks: &[(&str, i64)]) -> Series {
    Series {
        samples: stacks.len() as u64,
        producers: vec!["test".into()],
        stacks: stacks.iter().map(|(s, v)| (s.to_string(), *v)).collect(),
    }
}

fn key(service: &str) -> SeriesKey {
    SeriesKey {
        service: service.into(),
        sample_type: "cpu/nanoseconds".into(),
    }
}

fn totals(store: &Store, k: &SeriesKey) -> HashMap<String, i64> {
    store
        .stacks("p", k, 0, u64::MAX)
        .into_iter()
        .map(|(s, v)| (s.into_string(), v))
        .collect()
}

/// A hostile producer sending a million distinct long stacks: the store
/// stays within its bound (and holds that in the memory budget), and what
/// did not fit is still counted, in one frame.
#[test]
fn a_flood_of_distinct_stacks_stays_within_the_bound_and_keeps_totals() {
    let budget = MemoryBudget::new(1 << 30);
    let bound = 256 << 10;
    let mut store = Store::new(Duration::from_secs(60), 5, bound, budget.force(0));
    let at = Instant::now();
    let long = "f".repeat(200);
    let mut sent = 0i64;
    for batch in 0..30 {
        let stacks: Vec<(String, i64)> = (0..10_000)
            .map(|i| (format!("main;{long};fn{batch}_{i}"), 3))
            .collect();
        sent += 3 * stacks.len() as i64;
        let s = Series {
            samples: stacks.len() as u64,
            producers: vec![],
            stacks: stacks.into_iter().collect(),
        };
        store.add("p", key("api"), s, 10_000, 0, at);
        assert!(store.held_bytes() <= bound, "{}", store.held_bytes());
        assert_eq!(budget.used(), store.held_bytes());
    }
    let got = totals(&store, &key("api"));
    assert_eq!(got.values().sum::<i64>(), sent);
    assert!(got[OVER_BOUND] > 0);
    drop(store);
    assert_eq!(budget.used(), 0, "the budget gets back what the store held");
}

/// Older windows make room for new stacks before anything folds into the
/// over-bound frame, and windows past `windows` expire.
#[test]
fn old_windows_go_first() {
    let budget = MemoryBudget::new(1 << 30);
    let mut store = Store::new(Duration::from_secs(1), 3, 4 << 10, budget.force(0));
    let t0 = Instant::now();
    let long = "g".repeat(500);
    for w in 0..3u64 {
        let at = t0 + Duration::from_secs(w) + Duration::from_millis(100);
        let name = format!("main;{long};w{w}");
        store.add("p", key("a"), series(&[(name.as_str(), 1)]), 1, 0, at);
    }
    // A window with room only once the oldest goes.
    let at = t0 + Duration::from_millis(2200);
    let big: Vec<String> = (0..5).map(|i| format!("main;{long};new{i}")).collect();
    let pairs: Vec<(&str, i64)> = big.iter().map(|s| (s.as_str(), 1)).collect();
    store.add("p", key("a"), series(&pairs), 5, 0, at);
    let got = totals(&store, &key("a"));
    assert!(!got.keys().any(|k| k.ends_with(";w0")), "{got:?}");
    assert!(got.keys().any(|k| k.ends_with(";new0")), "{got:?}");
    // Three windows later, the first ones are gone.
    store.expire(store.index(t0 + Duration::from_secs(5)));
    assert!(store.held_bytes() < 4 << 10);
    assert_eq!(budget.used(), store.held_bytes());
}

fn shared() -> Arc<Shared> {
    Arc::new(Shared::new(Store::new(
        Duration::from_secs(60),
        5,
        1 << 20,
        MemoryBudget::new(1 << 30).force(0),
    )))
}

/// While folding is stuck, the tap neither waits nor grows: past its
/// queue, batches are skipped and their samples counted; what was queued
/// is folded once folding resumes, and the rates count the skipped too.
#[test]
fn a_full_tap_skips_and_counts_without_waiting() {
    let telemetry = Arc::new(profcol_pipeline::telemetry::Telemetry::new());
    let mut shared = Arc::into_inner(shared()).unwrap();
    shared.telemetry = Some((telemetry.clone(), "profilez".into()));
    let shared = Arc::new(shared);
    let tap = Arc::new(Tap::start(shared.clone(), 1, 1.0).unwrap());
    let batch = Arc::new(ProfileBatch::new(profcol_model::synth::request(50, 5)));
    let n = batch.sample_count();
    let held = shared.lock();
    // Folding is stuck until `held` goes: a tap that waited for it would
    // not come back at all.
    let (done, back) = std::sync::mpsc::channel();
    {
        let (tap, batch) = (tap.clone(), batch.clone());
        std::thread::spawn(move || {
            for _ in 0..10 {
                tap.accepted("p", &batch);
            }
            let _ = done.send(());
        });
    }
    assert!(
        back.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the tap waited for the stuck folding"
    );
    let skipped = shared.skipped("p");
    assert!(
        (8 * n..=9 * n).contains(&skipped),
        "{skipped} of {}",
        10 * n
    );
    let metric = format!(
        "otelcol_extension_profilez_skipped_profile_samples_total{{extension=\"profilez\",pipeline=\"p\",reason=\"queue_full\"}} {skipped}"
    );
    let text = telemetry.encode_text();
    assert!(text.contains(&metric), "{text}");
    drop(held);
    // The batches folded stand for those skipped in the rates.
    let all = 10 * n;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let store = shared.lock();
        let kept: u64 = store
            .pipelines()
            .get("p")
            .map(|v| {
                v.series
                    .values()
                    .map(|s| store.rates(s, Instant::now()).samples)
                    .sum()
            })
            .unwrap_or(0);
        if kept == all {
            break;
        }
        drop(store);
        assert!(Instant::now() < deadline, "counted {kept} of {all}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A batch forwarded as its client compressed it is inflated by the tap
/// for folding, and keeps holding only its compressed bytes.
#[test]
fn a_batch_held_compressed_is_folded_and_stays_compressed() {
    use profcol_model::compressed::{Compressed, Encoding};
    use prost::Message;
    use std::io::Write;
    let data = profcol_model::synth::service_requests(1, 1, 200).remove(0);
    let plain = bytes::Bytes::from(data.encode_to_vec());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let clean = profcol_model::wire_check::check(&plain).unwrap();
    let mut batch = ProfileBatch::checked(plain.clone(), clean).with_compressed(Some(Compressed {
        encoding: Encoding::Gzip,
        bytes: gz.finish().unwrap().into(),
        plain_len: plain.len(),
    }));
    batch.hold_bytes_only(Some(Encoding::Gzip));
    let batch = Arc::new(batch);
    let shared = shared();
    let tap = Tap::start(shared.clone(), 4, 1.0).unwrap();
    tap.accepted("p", &batch);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !shared.lock().pipelines().contains_key("p") {
        assert!(Instant::now() < deadline, "never folded");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(batch.plain_bytes().is_none() && !batch.is_decoded());
}

/// Folding sums each stack as the resolved view does, per service and type.
#[test]
fn folding_matches_the_resolved_view() {
    let data = profcol_model::synth::service_requests(1, 1, 500).remove(0);
    let folded = fold(&data);
    let resolved = profcol_model::folded(&data);
    assert_eq!(folded.len(), resolved.len());
    for p in &resolved {
        let s = folded
            .iter()
            .find(|(k, _)| k.sample_type == p.sample_type)
            .map(|(_, s)| s)
            .unwrap();
        let want: i64 = p.samples.values().sum();
        assert_eq!(s.stacks.values().sum::<i64>(), want);
        assert_eq!(s.samples, 500);
    }
}

#[test]
fn renders_shares_and_differences() {
    let labels = render::Labels {
        title: "t",
        subtitle: None,
        unit: "count",
    };
    let svg = String::from_utf8(render::flamegraph(
        [("main;work", 600), ("main;idle", 400)],
        &labels,
    ))
    .unwrap();
    assert!(
        svg.contains("aria-label=\"work (600 samples, 60.00% of all)\""),
        "{svg}"
    );
    // Values in the graph's unit.
    let ns = render::Labels {
        title: "t",
        subtitle: None,
        unit: "nanoseconds",
    };
    let svg = String::from_utf8(render::flamegraph([("main;work", 1200)], &ns)).unwrap();
    assert!(svg.contains("aria-label=\"work (1,200 nanoseconds, 100.00% of all)\""));
    let diff = String::from_utf8(render::differential(
        [("main;work", 600)],
        [("main;work", 600), ("main;new", 600)],
        &labels,
    ))
    .unwrap();
    let g = diff
        .split("<rect ")
        .find(|g| g.starts_with("aria-label=\"new "))
        .unwrap();
    assert!(g.contains("fill=\"rgb(255,"), "{g}");
    assert!(
        diff.contains("aria-label=\"new (600 samples, 50.00% of all; +50.00%)\""),
        "{diff}"
    );
    // Nothing to draw: a page that says so, not an error.
    let empty = String::from_utf8(render::flamegraph([], &labels)).unwrap();
    assert!(empty.contains("id=\"no-data\""), "{empty}");
}

/// Zoomed into a frame, the graph draws the stacks through it, so that
/// functions each too narrow to draw in the whole graph are drawn, each
/// with its share of the whole and of the frame zoomed into; the diff too.
#[test]
fn a_zoom_draws_what_was_too_narrow() {
    let labels = render::Labels {
        title: "t",
        subtitle: None,
        unit: "",
    };
    let stacks: Vec<(String, i64)> = (0..2_000)
        .map(|i| (format!("main;module{};function{i}", i % 10), 1))
        .collect();
    let pairs = || stacks.iter().map(|(s, v)| (s.as_str(), *v));
    let whole = String::from_utf8(render::flamegraph(pairs(), &labels)).unwrap();
    assert!(whole.contains("aria-label=\"module4 (200 samples, 10.00% of all)\""));
    assert!(
        !whole.contains("aria-label=\"function"),
        "0.05% each: not drawn"
    );
    let view = render::View {
        zoom: Some("main;module4"),
        served: true,
    };
    let zoomed = String::from_utf8(render::flamegraph_view(pairs(), &labels, &view)).unwrap();
    assert_eq!(
        zoomed.matches("aria-label=\"function").count(),
        200,
        "{zoomed}"
    );
    assert!(
        zoomed.contains("aria-label=\"function4 (1 samples, 0.05% of all, 0.50% of module4)\""),
        "{zoomed}"
    );
    assert!(!zoomed.contains("module3"));
    assert!(zoomed.contains("zoomed into main;module4: 10.00% of all"));
    assert!(zoomed.contains("var pz_server_zoom = true;\nvar pz_zoomed = true;"));
    // `main;module4` is not `main;module40`'s parent.
    let view = render::View {
        zoom: Some("main;module"),
        served: true,
    };
    let none = String::from_utf8(render::flamegraph_view(pairs(), &labels, &view)).unwrap();
    assert!(none.contains("id=\"no-data\""), "{none}");
    let view = render::View {
        zoom: Some("main;module4"),
        served: true,
    };
    let diff =
        String::from_utf8(render::differential_view(pairs(), pairs(), &labels, &view)).unwrap();
    assert_eq!(diff.matches("aria-label=\"function").count(), 200, "{diff}");
}

/// A graph's subtitle says when its values count only the batches folded.
#[test]
fn a_graph_of_skipped_batches_says_so() {
    assert_eq!(skipped_note((100, 100)), "");
    assert_eq!(
        skipped_note((400, 100)),
        "; values count the batches folded: 100 of 400 samples (25.0%), the rest skipped under the tap's CPU budget or a full queue"
    );
    let budget = MemoryBudget::new(1 << 30);
    let mut store = Store::new(Duration::from_secs(1), 3, 1 << 20, budget.force(0));
    store.add(
        "p",
        key("a"),
        series(&[("main;a", 1)]),
        4,
        0,
        Instant::now(),
    );
    assert_eq!(store.coverage("p", &key("a"), 0, u64::MAX), (4, 1));
}

/// The folding stops once its thread's CPU time passes its share of the
/// rest of the process's (after the burst it starts with).
#[test]
fn folding_past_its_cpu_share_is_refused() {
    let mut budget = super::tap::CpuBudget::new(1e-9);
    assert!(budget.allows(), "a quiet collector folds what it is sent");
    let thread_cpu = || super::clock::thread().as_secs_f64();
    let start = thread_cpu();
    let mut x = 0u64;
    while thread_cpu() - start < super::tap::CpuBudget::BURST + 0.05 {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
    }
    assert!(!budget.allows(), "past its burst and share");
}
