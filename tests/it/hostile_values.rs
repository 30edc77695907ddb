//! The values that once made profcol loop or allocate without end, fed
//! straight to every processor and every exporter (as if something had let
//! them through ingest): each must finish in bounded time, and the exporters
//! that send must not send anything built from them.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use profcol_model::{synth, validate, Problem, ProfileBatch};
use profcol_pipeline::component::{ExporterContext, ProcessContext, Request};
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::runtime::create_exporter;
use profcol_pipeline::telemetry::Telemetry;

/// Every processor in the configs a user is likely to write.
const PROCESSORS: &[(&str, &str)] = &[
    ("dictionary_dedup", "{}"),
    (
        "unit_normalization",
        "{target: ucum, scale_to_base: true, samples_to_time: true}",
    ),
    ("unit_normalization", "{target: pprof}"),
    (
        "thread_pruning",
        "{min_samples_per_thread: 2, rename_threads: [{pattern: 'm(.*)', replacement: 'x$$1'}]}",
    ),
    ("sampling", "{sampling_percentage: 50, mode: profile}"),
    ("sampling", "{sampling_percentage: 100, mode: session}"),
];

#[test]
fn ingest_refuses_the_times_past_2262() {
    for (name, data) in synth::hostile() {
        let refused = matches!(
            validate(&data),
            Err(e) if matches!(e.problem, Problem::TimeOutOfRange { .. })
        );
        assert_eq!(
            refused,
            name.contains("2^64-1"),
            "{name}: {:?}",
            validate(&data)
        );
    }
}

#[test]
fn every_processor_finishes_each_hostile_batch() {
    let registry = profcol::components::registry();
    for (ty, yaml) in PROCESSORS {
        let cfg = ComponentConfig::from_yaml(Kind::Processor, ty, yaml).unwrap();
        for (name, data) in synth::hostile() {
            let mut p = registry.processors[ty].create(&cfg).unwrap();
            let label = format!("{ty} {yaml} on {name}");
            common::within(Duration::from_secs(20), &label, move || {
                let telemetry = Telemetry::new();
                let mut ctx = ProcessContext::new("p", ty, &telemetry);
                let mut batch = ProfileBatch::new(data);
                p.process(&mut batch, &mut ctx);
            });
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_exporter_finishes_each_hostile_batch_and_sends_nothing_of_it() {
    let sentry = profcol_exporters::sentry::mock::MockSentry::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (_dead, dead) = common::refusing_port();
    let exporters = [
        ("debug", "{verbosity: detailed}".to_owned()),
        ("sentry", format!("{{dsn: '{}'}}", sentry.dsn())),
        (
            "pprof",
            format!("{{directory: '{}'}}", dir.path().join("pprof").display()),
        ),
        (
            "file",
            format!(
                "{{path: '{}', format: json}}",
                dir.path().join("f.jsonl").display()
            ),
        ),
        (
            "file",
            format!(
                "{{path: '{}', format: proto}}",
                dir.path().join("f.bin").display()
            ),
        ),
        (
            "otlp",
            format!("{{endpoint: '127.0.0.1:{dead}', tls: {{insecure: true}}}}"),
        ),
        (
            "loadbalancing",
            format!(
                "{{routing_key: traceID, protocol: {{otlp: {{tls: {{insecure: true}}}}}}, \
                 resolver: {{static: {{hostnames: ['127.0.0.1:{dead}', '127.0.0.2:{dead}']}}}}}}"
            ),
        ),
    ];
    let registry = profcol::components::registry();
    for (ty, yaml) in &exporters {
        let cfg = ComponentConfig::from_yaml(Kind::Exporter, ty, yaml).unwrap();
        let (exporter, _) = create_exporter(&*registry.exporters[ty], &cfg).unwrap();
        let ctx = ExporterContext {
            id: ty.to_string(),
            telemetry: Arc::new(Telemetry::new()),
            authenticators: Default::default(),
            budget: profcol_model::memory::MemoryBudget::new(1 << 30),
        };
        exporter.start(&ctx).await.unwrap();
        for (name, data) in synth::hostile() {
            let batch = Arc::new(ProfileBatch::new(data));
            let attempt = tokio::time::timeout(
                Duration::from_secs(20),
                exporter.export(&Request::new(batch), &ctx),
            )
            .await;
            assert!(attempt.is_ok(), "{ty} on {name}: no answer within 20 s");
        }
    }
    // Only the plausible inputs reach Sentry, each as one small chunk.
    let chunks = sentry.requests();
    assert!(chunks.len() <= 2, "{} envelopes sent", chunks.len());
    for r in &chunks {
        assert!(
            r.body.len() < 64 << 10,
            "an envelope of {} bytes",
            r.body.len()
        );
    }
}
