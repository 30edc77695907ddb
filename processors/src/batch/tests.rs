use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;

use profcol_model::memory::{Held, MemoryBudget};
use profcol_model::{resolve, synth, validate, Detail, ProfileBatch};
use profcol_pipeline::component::{Processor, StageContext, Stateful};
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::telemetry::Telemetry;

use super::*;

fn batch_processor(yaml: &str) -> Result<Box<dyn Processor>, String> {
    let cfg =
        ComponentConfig::from_yaml(Kind::Processor, "batch", yaml).map_err(|e| e.to_string())?;
    factory().create(&cfg).map_err(|e| e.to_string())
}

fn requests(n: usize, services: usize, samples: usize) -> Vec<ProfileBatch> {
    synth::service_requests(n, services, samples)
        .into_iter()
        .map(|d| ProfileBatch::decode(Bytes::from(d.encode_to_vec())).unwrap())
        .collect()
}

/// Every profile of `batches`, resolved to folded stacks with its resource
/// and scope, as sorted text: what a user sees, whatever the batching.
fn view(batches: &[ProfileBatch]) -> Vec<String> {
    let mut v: Vec<String> = batches
        .iter()
        .flat_map(|b| resolve(b.data(), Detail::Full).profiles)
        .map(|p| resolve_text(&p))
        .collect();
    v.sort();
    v
}

fn resolve_text(p: &profcol_model::ResolvedProfile) -> String {
    profcol_model::ResolvedView {
        profiles: vec![p.clone()],
    }
    .to_text()
}

struct Run {
    p: Box<dyn Processor>,
    telemetry: Telemetry,
}

impl Run {
    fn new(yaml: &str) -> Self {
        Self {
            p: batch_processor(yaml).unwrap(),
            telemetry: Telemetry::new(),
        }
    }

    fn stage(&mut self) -> (&mut dyn Stateful, StageContext<'_>) {
        let ctx = StageContext {
            pipeline: "profiles",
            processor: "batch",
            telemetry: &self.telemetry,
        };
        (self.p.stateful().unwrap(), ctx)
    }

    fn accept(&mut self, b: ProfileBatch, now: Instant) -> Vec<ProfileBatch> {
        let mut out = Vec::new();
        let (s, ctx) = self.stage();
        s.accept(b, now, &mut out, &ctx);
        out
    }

    fn tick(&mut self, now: Instant) -> Vec<ProfileBatch> {
        let mut out = Vec::new();
        let (s, ctx) = self.stage();
        s.tick(now, &mut out, &ctx);
        out
    }

    fn flush(&mut self) -> Vec<ProfileBatch> {
        let mut out = Vec::new();
        let (s, ctx) = self.stage();
        s.flush(&mut out, &ctx);
        out
    }

    fn deadline(&mut self) -> Option<Instant> {
        self.stage().0.deadline()
    }

    fn metric(&self, line_start: &str) -> String {
        let text = self.telemetry.encode_text();
        text.lines()
            .find(|l| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("{line_start} not in\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    }
}

#[test]
fn merges_many_small_requests_into_few_with_one_dictionary() {
    let inputs = requests(200, 10, 20);
    let total: u64 = inputs.iter().map(|b| b.sample_count()).sum();
    let encoded_in: usize = inputs.iter().map(|b| b.encoded_len()).sum();
    let want = view(&inputs);
    let mut run = Run::new("send_batch_size: 1000\ntimeout: 10s");
    let now = Instant::now();
    let mut one = Run::new("send_batch_size: 0\ntimeout: 10s");
    for b in requests(200, 10, 20) {
        assert!(one.accept(b, now).is_empty());
    }
    let all = one.flush();
    assert_eq!(all.len(), 1);
    // 200 requests, 20 from each service, in 27 % of their bytes.
    let encoded_all = all[0].encoded_len();
    assert!(
        encoded_all * 100 <= encoded_in * 40,
        "merged {encoded_all} bytes from {encoded_in}"
    );
    let mut out = Vec::new();
    for b in inputs {
        out.extend(run.accept(b, now));
    }
    out.extend(run.flush());
    assert_eq!(out.iter().map(|b| b.sample_count()).sum::<u64>(), total);
    assert_eq!(view(&out), want);
    for b in &out {
        validate(b.data()).unwrap();
        // Equal resources merged: one per service.
        assert_eq!(b.data().resource_profiles.len(), 10);
        assert!(b
            .data()
            .resource_profiles
            .iter()
            .all(|r| r.scope_profiles.len() == 1));
    }
    // 4000 samples in batches of at least 1000; the more a batch
    // merges, the more its inputs share.
    assert_eq!(
        out.len(),
        4,
        "{:?}",
        out.iter().map(|b| b.sample_count()).collect::<Vec<_>>()
    );
    let encoded_out: usize = out.iter().map(|b| b.encoded_len()).sum();
    assert!(
        encoded_all < encoded_out && encoded_out < encoded_in * 3 / 5,
        "merged {encoded_out} bytes in 4 batches, {encoded_all} in one, from {encoded_in}"
    );
    assert_eq!(
        run.metric("otelcol_processor_batch_batch_size_trigger_send_total"),
        "4"
    );
    assert_eq!(
        run.metric("otelcol_processor_batch_batch_send_size_count"),
        "4"
    );
}

#[test]
fn timeout_sends_what_waited_and_size_sends_at_once() {
    let mut run = Run::new("send_batch_size: 100\ntimeout: 1s");
    let t0 = Instant::now();
    let mut inputs = requests(9, 2, 20).into_iter();
    // Alone, a request goes out as it came: its received bytes forwarded.
    assert!(run.accept(inputs.next().unwrap(), t0).is_empty());
    assert_eq!(run.deadline(), Some(t0 + Duration::from_secs(1)));
    let sent = run.tick(t0 + Duration::from_secs(1));
    assert_eq!(sent.len(), 1);
    assert!(sent[0].encoded().is_some());
    assert_eq!(run.deadline(), None);
    // A batch times out `timeout` after its oldest data, not its newest.
    assert!(run.accept(inputs.next().unwrap(), t0).is_empty());
    assert!(run
        .accept(inputs.next().unwrap(), t0 + Duration::from_millis(300))
        .is_empty());
    assert_eq!(run.deadline(), Some(t0 + Duration::from_secs(1)));
    assert!(run.tick(t0 + Duration::from_millis(999)).is_empty());
    let sent = run.tick(t0 + Duration::from_secs(1));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].sample_count(), 40);
    assert!(sent[0].encoded().is_none());
    assert_eq!(
        run.metric("otelcol_processor_batch_timeout_trigger_send_total"),
        "2"
    );
    // Six more (20 samples each): 100 reached at the fifth, sent at once.
    let mut sent = Vec::new();
    for b in inputs.by_ref().take(6) {
        sent.extend(run.accept(b, t0 + Duration::from_millis(400)));
    }
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].sample_count(), 100);
    assert_eq!(
        run.metric("otelcol_processor_batch_batch_size_trigger_send_total"),
        "1"
    );
    assert_eq!(run.deadline(), Some(t0 + Duration::from_millis(1400)));
    assert_eq!(
        run.flush().iter().map(|b| b.sample_count()).sum::<u64>(),
        20
    );
    assert_eq!(run.deadline(), None);
}

/// One request of 8 resources with a profile of 20 samples each.
fn eight_profiles() -> profcol_model::proto::ProfilesData {
    synth::Config {
        samples: 160,
        stacks: 100,
        functions: 100,
        resources: 8,
        ..synth::Config::default()
    }
    .build()
}

#[test]
fn max_size_splits_between_profiles_never_inside_one() {
    let mut run = Run::new("send_batch_size: 30\nsend_batch_max_size: 50\ntimeout: 1s");
    let data = eight_profiles();
    let input = ProfileBatch::new(data);
    let want = view(std::slice::from_ref(&input));
    let mut out = run.accept(input, Instant::now());
    out.extend(run.flush());
    let sizes: Vec<u64> = out.iter().map(|b| b.sample_count()).collect();
    assert!(sizes.iter().all(|&n| n <= 50), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<u64>(), 160);
    assert_eq!(view(&out), want);
    for b in &out {
        validate(b.data()).unwrap();
    }
    // A profile larger than the cap goes alone, whole.
    let big = ProfileBatch::new(synth::request(120, 50));
    let out = run.accept(big, Instant::now());
    assert_eq!(
        out.iter().map(|b| b.sample_count()).collect::<Vec<_>>(),
        vec![120]
    );
}

/// An exporter's `sending_queue.batch` with `sizer: bytes`: sizes count
/// the inputs' encoded bytes, added up as exporterhelper adds them, and a
/// larger input is split by its profiles' bytes.
#[test]
fn the_bytes_sizer_counts_encoded_bytes() {
    let refused = batch_processor("sizer: bytes").err().unwrap();
    assert!(
        refused.contains("processors::batch::sizer: unknown field"),
        "{refused}"
    );
    let queue_batch = |yaml: &str| Run {
        p: factory()
            .create(
                &ComponentConfig::from_yaml(Kind::Processor, "batch/sending_queue_otlp", yaml)
                    .unwrap(),
            )
            .unwrap(),
        telemetry: Telemetry::new(),
    };
    let three: usize = requests(10, 2, 20)[..3]
        .iter()
        .map(|b| b.encoded_len())
        .sum();
    // Out at the third input's bytes; with items (samples) not before the
    // tenth.
    let now = Instant::now();
    for (sizer, sent_at) in [("bytes", 3), ("items", 10)] {
        let size = if sizer == "bytes" { three } else { 200 };
        let mut run = queue_batch(&format!(
            "sizer: {sizer}\nsend_batch_size: {size}\ntimeout: 10s"
        ));
        let mut first = None;
        for (i, b) in requests(10, 2, 20).into_iter().enumerate() {
            if !run.accept(b, now).is_empty() && first.is_none() {
                first = Some(i + 1);
            }
        }
        assert_eq!(first, Some(sent_at), "{sizer}");
    }
    // One input of 8 profiles split at 3 profiles' bytes, never inside one.
    let data = eight_profiles();
    let profile = Message::encoded_len(&data.resource_profiles[0].scope_profiles[0].profiles[0]);
    let max = 3 * profile as u64 + 10;
    let input = ProfileBatch::new(data);
    let want = view(std::slice::from_ref(&input));
    let mut run = queue_batch(&format!(
        "sizer: bytes\nsend_batch_size: {max}\nsend_batch_max_size: {max}\ntimeout: 10s"
    ));
    let mut out = run.accept(input, now);
    out.extend(run.flush());
    assert!(out.len() >= 3, "{} parts", out.len());
    for b in &out {
        let bytes: u64 = b.data().resource_profiles[..]
            .iter()
            .flat_map(|r| &r.scope_profiles)
            .flat_map(|s| &s.profiles)
            .map(|p| Message::encoded_len(p) as u64)
            .sum();
        assert!(bytes <= max, "{bytes} > {max}");
    }
    assert_eq!(view(&out), want);
}

#[test]
fn metadata_values_keep_batches_apart_up_to_the_cardinality_limit() {
    let mut run = Run::new(
        "send_batch_size: 1000\ntimeout: 1s\nmetadata_keys: [X-Tenant]\nmetadata_cardinality_limit: 2",
    );
    let now = Instant::now();
    let tenant = |b: &mut ProfileBatch, t: Option<&str>| {
        b.meta.metadata = vec![("user-agent".into(), "sdk".into())];
        if let Some(t) = t {
            b.meta.metadata.push(("x-tenant".into(), t.into()));
        }
    };
    let mut inputs = requests(6, 1, 10);
    for (b, t) in inputs.iter_mut().zip([
        Some("a"),
        Some("b"),
        Some("a"),
        Some("b"),
        Some("a"),
        Some("b"),
    ]) {
        tenant(b, t);
    }
    for b in inputs {
        assert!(run.accept(b, now).is_empty());
    }
    assert_eq!(
        run.metric("otelcol_processor_batch_metadata_cardinality"),
        "2"
    );
    // A third combination (no tenant at all) makes the oldest go early.
    let mut third = requests(1, 1, 10).pop().unwrap();
    tenant(&mut third, None);
    let early = run.accept(third, now);
    assert_eq!(early.len(), 1);
    assert_eq!(early[0].sample_count(), 30);
    // What went out carries only the metadata it was grouped by.
    assert_eq!(
        early[0].meta.metadata,
        vec![("x-tenant".to_owned(), "a".to_owned())]
    );
    let rest = run.flush();
    assert_eq!(rest.len(), 2);
    assert_eq!(
        rest[0].meta.metadata,
        vec![("x-tenant".to_owned(), "b".to_owned())]
    );
    assert!(rest[1].meta.metadata.is_empty());
}

#[test]
fn merged_batches_hold_their_own_memory_and_release_their_inputs() {
    let budget = MemoryBudget::new(1 << 30);
    let mut inputs = requests(50, 5, 20);
    for b in &mut inputs {
        b.meta.memory = Some(Held::new(budget.try_admit(b.held_bytes()).unwrap()));
        b.meta.receiver = "otlp".into();
    }
    let inputs_bytes = budget.used();
    let mut run = Run::new("send_batch_size: 100000\ntimeout: 1s");
    for b in inputs {
        assert!(run.accept(b, Instant::now()).is_empty());
    }
    // Held: the inputs' reservations stay until the merged batch goes.
    assert_eq!(budget.used(), inputs_bytes);
    let out = run.flush();
    assert_eq!(out.len(), 1);
    let merged = &out[0];
    assert_eq!(budget.used(), merged.held_bytes());
    assert_eq!(
        merged.meta.memory.as_ref().unwrap().bytes(),
        merged.held_bytes()
    );
    assert!(
        merged.held_bytes() < inputs_bytes / 2,
        "{} of {inputs_bytes}",
        merged.held_bytes()
    );
    assert_eq!(merged.meta.receiver, "otlp");
    drop(out);
    assert_eq!(budget.used(), 0);
}

#[test]
fn config_as_the_collector_checks_it() {
    let p = "processors::batch";
    for (yaml, want) in [
        ("send_batch_size: 100\nsend_batch_max_size: 10", format!("{p}::send_batch_max_size: send_batch_max_size must be greater or equal to send_batch_size")),
        ("metadata_keys: [Tenant, tenant]", format!("{p}::metadata_keys::1: duplicate entry in metadata_keys: \"tenant\" (case-insensitive)")),
        ("metadata_keys: [a]\nmetadata_cardinality_limit: 0", format!("{p}::metadata_cardinality_limit: must be greater than 0")),
        ("timeout: -1s", format!("{p}::timeout: invalid duration")),
        ("send_batch_sizes: 1", format!("{p}: unknown field \"send_batch_sizes\"")),
    ] {
        let err = batch_processor(yaml).err().unwrap();
        assert!(err.contains(&want), "{yaml}: {err}");
    }
    // The Collector's defaults: 8192 samples, 200 ms, no cap.
    let mut run = Run::new("{}");
    let now = Instant::now();
    assert!(run
        .accept(requests(1, 1, 10).pop().unwrap(), now)
        .is_empty());
    assert_eq!(run.deadline(), Some(now + Duration::from_millis(200)));
    // timeout 0: every batch at once.
    let mut run = Run::new("timeout: 0s");
    assert_eq!(run.accept(requests(1, 1, 10).pop().unwrap(), now).len(), 1);
}

#[test]
fn a_timeout_of_centuries_does_not_overflow() {
    let mut run = Run::new("timeout: 2000000h");
    let now = Instant::now();
    assert!(run
        .accept(requests(1, 1, 10).pop().unwrap(), now)
        .is_empty());
    assert!(run.deadline().unwrap() > now + Duration::from_secs(365 * 86400));
    assert_eq!(run.flush().len(), 1);
}
