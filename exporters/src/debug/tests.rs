use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_pipeline::config::{ComponentConfig, Kind};

use profcol_pipeline::runtime::create_exporter;

use super::*;

fn fixture(name: &str) -> ProfileBatch {
    let bytes = profcol_model::testing::fixture(&format!("otlp/{name}"));
    ProfileBatch::new(ProfilesData::decode(bytes.as_slice()).unwrap())
}

fn create(yaml: &str) -> Result<(DebugConfig, ExporterSettings), String> {
    let cfg =
        ComponentConfig::from_yaml(Kind::Exporter, "debug", yaml).map_err(|e| e.to_string())?;
    let decoded: DebugConfig = cfg.decode().map_err(|e| e.to_string())?;
    let (_, settings) = create_exporter(&DebugExporterFactory, &cfg).map_err(|e| e.to_string())?;
    Ok((decoded, settings))
}

#[test]
fn empty_config_takes_the_collector_defaults() {
    for yaml in ["{}", ""] {
        let (c, settings) = create(yaml).unwrap();
        assert_eq!(c, DebugConfig::default());
        assert_eq!(
            (
                c.verbosity,
                c.sampling_initial,
                c.sampling_thereafter,
                c.use_internal_logger
            ),
            (Verbosity::Basic, 2, 1, true)
        );
        // Like the Collector's: no queue, no retries.
        assert!(!settings.sending_queue.enabled && !settings.retry_on_failure.enabled);
    }
}

#[test]
fn exact_decode() {
    let (c, _) = create(
        "verbosity: detailed\nsampling_initial: 5\nsampling_thereafter: 10\nuse_internal_logger: false",
    )
    .unwrap();
    assert_eq!(
        c,
        DebugConfig {
            verbosity: Verbosity::Detailed,
            sampling_initial: 5,
            sampling_thereafter: 10,
            use_internal_logger: false,
            output_paths: None,
        }
    );
    assert_eq!(
        create("verbosity: normal").unwrap().0.verbosity,
        Verbosity::Normal
    );
}

#[test]
fn invalid_settings_name_their_key() {
    for (yaml, want) in [
        (
            "verbosity: loud",
            r#"exporters::debug::verbosity: unknown value "loud", expected one of "basic", "normal", "detailed""#,
        ),
        (
            "sampling_thereafter: 0",
            "exporters::debug::sampling_thereafter: must be at least 1",
        ),
        (
            "timeout: 5s",
            r#"exporters::debug: unknown field "timeout", expected one of "verbosity", "sampling_initial", "sampling_thereafter", "use_internal_logger", "output_paths""#,
        ),
    ] {
        assert_eq!(create(yaml).unwrap_err(), want, "{yaml:?}");
    }
}

/// Every problem of the section, the decode error included, at once.
#[test]
fn every_problem_is_reported_at_once() {
    let cfg = ComponentConfig::from_yaml(
        Kind::Exporter,
        "debug",
        "verbosity: loud\nsampling_thereafter: 0",
    )
    .unwrap();
    assert_eq!(
        create_exporter(&DebugExporterFactory, &cfg).err().unwrap().to_string(),
        "exporters::debug::verbosity: unknown value \"loud\", expected one of \"basic\", \"normal\", \"detailed\"\n\
         exporters::debug::sampling_thereafter: must be at least 1"
    );
}

#[test]
fn verbosities_render_as_the_collector_does() {
    let batch = fixture("minimal-request.bin");
    let summary = "Profiles: resource profiles: 1, profiles: 1, samples: 3";
    assert_eq!(render(&batch, Verbosity::Basic), summary);
    assert_eq!(
        render(&batch, Verbosity::Normal),
        format!(
            "{summary}\n  resource #0 profile 0102030405060708090a0b0c0d0e0f10 cpu/nanoseconds: 3 samples, duration 1000ms"
        )
    );
    let detailed = render(&batch, Verbosity::Detailed);
    assert!(detailed.starts_with(&format!("{summary}\n")), "{detailed}");
    for line in [
        "  resource: service.name=holdout-minimal",
        "  main;work 10000000",
        "  main;work;leaf [thread.name=main] 20000000",
    ] {
        assert!(
            detailed.lines().any(|l| l == line),
            "{line:?} in\n{detailed}"
        );
    }

    // One line per profile at `normal`.
    let two = fixture("go-cpu.otlp.bin");
    let normal = render(&two, Verbosity::Normal);
    assert_eq!(
        normal.lines().count(),
        1 + two.profile_count() as usize,
        "{normal}"
    );
    assert_eq!(render(&two, Verbosity::Basic).lines().count(), 1);

    // Both count observations: a sample with 3 timestamps counts 3.
    let linked = fixture("two-resources-request.bin");
    let total: u64 = render(&linked, Verbosity::Normal)
        .lines()
        .skip(1)
        .map(|l| {
            let n = l.split(": ").nth(1).unwrap().split(' ').next().unwrap();
            n.parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(total, linked.sample_count());
    let messages: usize = linked
        .data()
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| p.samples.len())
        .sum();
    assert!(
        total > messages as u64,
        "{total} observations, {messages} Samples"
    );
}

#[test]
fn sampling_logs_the_first_batches_then_one_in_n() {
    let (c, _) = create("sampling_initial: 2\nsampling_thereafter: 3").unwrap();
    let e = DebugExporter {
        outputs: c.outputs(),
        cfg: c,
        seen: AtomicU64::new(0),
    };
    let logged: Vec<bool> = (0..8).map(|_| e.sampled()).collect();
    assert_eq!(logged, [true, true, true, false, false, true, false, false]);
}

/// `output_paths`, with the Collector's checks and meaning: only without
/// the internal logger, not empty; `stdout`, `stderr` or files appended to.
#[tokio::test]
async fn output_paths_as_the_collector_has_them() {
    let (c, _) = create("use_internal_logger: false\noutput_paths: [stderr]").unwrap();
    assert_eq!(c.output_paths, Some(vec!["stderr".to_owned()]));
    for (yaml, want) in [
        (
            "output_paths: [stdout]",
            "exporters::debug::output_paths: output_paths is not supported when use_internal_logger is true",
        ),
        (
            "use_internal_logger: false\noutput_paths: []",
            "exporters::debug::output_paths: output_paths must not be empty when use_internal_logger is false",
        ),
        (
            "use_internal_logger: false\noutput_paths: [stdout, /nonexistent/dir/out.txt]",
            "exporters::debug::output_paths::1: /nonexistent/dir does not exist",
        ),
    ] {
        assert_eq!(create(yaml).unwrap_err(), want, "{yaml}");
    }

    // A file gets one block of text per batch, appended.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("debug.txt");
    std::fs::write(&path, "before\n").unwrap();
    let yaml = format!(
        "use_internal_logger: false\noutput_paths: [{}]",
        path.display()
    );
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "debug", &yaml).unwrap();
    let (exporter, _) = create_exporter(&DebugExporterFactory, &cfg).unwrap();
    let ctx = ExporterContext {
        id: "debug".into(),
        telemetry: std::sync::Arc::new(profcol_pipeline::telemetry::Telemetry::new()),
        authenticators: Default::default(),
        budget: profcol_model::memory::MemoryBudget::new(1 << 30),
    };
    exporter.start(&ctx).await.unwrap();
    let batch = std::sync::Arc::new(fixture("minimal-request.bin"));
    exporter
        .export(&Request::new(batch.clone()), &ctx)
        .await
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("before\nProfiles: resource profiles: "),
        "{text}"
    );
}

#[test]
fn metrics_render_their_counts_and_names() {
    use profcol_model::proto::metrics::*;
    let point = NumberDataPoint::default();
    let req = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "cpu".into(),
                    unit: "ns".into(),
                    data: Some(metric::Data::Gauge(Gauge {
                        data_points: vec![point; 2],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    assert_eq!(
        render_metrics(&req, Verbosity::Basic),
        "Metrics: resource metrics: 1, metrics: 1, data points: 2"
    );
    assert_eq!(
        render_metrics(&req, Verbosity::Normal),
        "Metrics: resource metrics: 1, metrics: 1, data points: 2\n  resource #0 metric cpu (ns): 2 data points"
    );
    assert!(render_metrics(&req, Verbosity::Detailed).contains("\"name\": \"cpu\""));
}
