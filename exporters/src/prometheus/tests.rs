use std::collections::HashMap;
use std::time::{Duration, Instant};

use profcol_model::memory::MemoryBudget;
use profcol_model::proto::metrics::*;
use profcol_model::proto::{any_value, AnyValue, InstrumentationScope, KeyValue, Resource};
use profcol_pipeline::config::{ComponentConfig, Kind};

use super::naming::{label_name, metric_name, value_string, NameType};
use super::*;

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn settings() -> Settings {
    Settings {
        namespace: String::new(),
        suffixes: true,
        const_labels: Vec::new(),
        resource_to_telemetry: false,
        send_timestamps: false,
        expiration: Duration::from_secs(300),
        max_series: 1000,
    }
}

/// A request of one resource (`service.name` = `svc`) and one metric.
fn request(resource: Vec<KeyValue>, m: Metric) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource,
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "sc".into(),
                    ..Default::default()
                }),
                metrics: vec![m],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn sum(name: &str, unit: &str, temporality: i32, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.into(),
        unit: unit.into(),
        description: "CPU \"time\"\\ by\nfunction".into(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: temporality,
            is_monotonic: true,
        })),
        ..Default::default()
    }
}

fn point(attrs: Vec<KeyValue>, start: u64, time: u64, v: i64) -> NumberDataPoint {
    NumberDataPoint {
        attributes: attrs,
        start_time_unix_nano: start,
        time_unix_nano: time,
        value: Some(number_data_point::Value::AsInt(v)),
        ..Default::default()
    }
}

const DELTA: i32 = AggregationTemporality::Delta as i32;
const CUMULATIVE: i32 = AggregationTemporality::Cumulative as i32;

/// The samples of a parsed exposition: (metric name, labels) -> value.
fn parse(text: &str) -> HashMap<(String, Vec<(String, String)>), f64> {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("the exposition parses");
    let mut out = HashMap::new();
    for s in scrape.samples {
        let mut labels: Vec<(String, String)> = s
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let value = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(h) => {
                for b in h {
                    let mut l = labels.clone();
                    l.push(("le".into(), go_float(b.less_than)));
                    l.sort();
                    out.insert((format!("{}_bucket", s.metric), l), b.count);
                }
                continue;
            }
            prometheus_parse::Value::Summary(_) => unreachable!(),
        };
        labels.sort();
        out.insert((s.metric, labels), value);
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn names_are_translated_as_the_collectors() {
    use NameType::*;
    // Cases of prometheus/otlptranslator's metric_namer_test.go.
    for (name, unit, ty, ns, want) in [
        (
            "system.filesystem.usage",
            "By",
            Gauge,
            "",
            "system_filesystem_usage_bytes",
        ),
        (
            "cpu.time",
            "ns",
            MonotonicCounter,
            "",
            "cpu_time_nanoseconds_total",
        ),
        ("requests", "1", MonotonicCounter, "", "requests_total"),
        ("requests_total", "", MonotonicCounter, "", "requests_total"),
        (
            "system.cpu.utilization",
            "1",
            Gauge,
            "",
            "system_cpu_utilization_ratio",
        ),
        ("queue.depth", "1", NonMonotonicCounter, "", "queue_depth"),
        ("samples", "{sample}", MonotonicCounter, "", "samples_total"),
        ("speed", "m/s", Gauge, "", "speed_meters_per_second"),
        (
            "throughput",
            "By/s",
            Histogram,
            "",
            "throughput_bytes_per_second",
        ),
        (
            "latency",
            "ms",
            Histogram,
            "profcol",
            "profcol_latency_milliseconds",
        ),
        ("foo..bar__baz", "", Gauge, "", "foo_bar_baz"),
        ("0x.name", "", Gauge, "", "_0x_name"),
        ("size_bytes", "By", Gauge, "", "size_bytes"),
        ("temp", "Cel", Gauge, "", "temp_celsius"),
    ] {
        assert_eq!(
            metric_name(name, unit, ty, ns, true).as_deref(),
            Some(want),
            "{name} {unit}"
        );
    }
    // Without suffixes: invalid runs become one `_`, nothing added.
    assert_eq!(
        metric_name("cpu.time", "ns", MonotonicCounter, "", false).as_deref(),
        Some("cpu_time")
    );
    assert_eq!(
        metric_name("a.b", "", Gauge, "ns", false).as_deref(),
        Some("ns_a_b")
    );
    assert_eq!(metric_name("...", "", Gauge, "", true), None);
    for (key, want) in [
        ("http.method", Some("http_method")),
        ("123invalid", Some("key_123invalid")),
        ("_private", Some("key_private")),
        ("__reserved__", Some("__reserved__")),
        ("function.name", Some("function_name")),
        ("", None),
    ] {
        assert_eq!(label_name(key).as_deref(), want, "{key}");
    }
}

#[test]
fn values_are_written_as_go_writes_them() {
    for (f, want) in [
        (0.0, "0"),
        (1.0, "1"),
        (-1.5, "-1.5"),
        (100.0, "100"),
        (123456.0, "123456"),
        (1234567.0, "1.234567e+06"),
        (1e6, "1e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.5e-10, "1.5e-10"),
        (1e100, "1e+100"),
        (f64::INFINITY, "+Inf"),
        (f64::NEG_INFINITY, "-Inf"),
        (f64::NAN, "NaN"),
        (0.1, "0.1"),
        (2.5e5, "250000"),
    ] {
        assert_eq!(go_float(f), want, "{f}");
    }
    // pcommon's AsString of attribute values.
    let v = |v: any_value::Value| value_string(Some(&AnyValue { value: Some(v) }));
    assert_eq!(v(any_value::Value::IntValue(-3)), "-3");
    assert_eq!(v(any_value::Value::BoolValue(true)), "true");
    assert_eq!(v(any_value::Value::DoubleValue(1.5)), "1.5");
    assert_eq!(v(any_value::Value::DoubleValue(1e21)), "1e+21");
    assert_eq!(
        v(any_value::Value::BytesValue(b"hi!?".to_vec())),
        "aGkhPw=="
    );
}

/// Deltas without a start time (what signaltometrics sends) and deltas
/// aligned with the last point add up; cumulative points replace.
#[test]
fn deltas_add_up_into_counters_and_cumulative_points_replace() {
    let mut st = Store::new(settings());
    let res = vec![
        kv("service.name", "checkout"),
        kv("service.instance.id", "i-1"),
    ];
    let now = Instant::now();
    let f = |a: &str| vec![kv("function.name", a)];
    for (t, pts) in [
        (
            10,
            vec![point(f("main"), 0, 10, 5), point(f("parse"), 0, 10, 7)],
        ),
        (20, vec![point(f("main"), 0, 20, 3)]),
        // Aligned with the last point's time: added too.
        (30, vec![point(f("main"), 20, 30, 2)]),
    ] {
        let r = request(res.clone(), sum("cpu", "ns", DELTA, pts));
        let folded = st.fold(&r, now);
        assert_eq!(folded.refused, 0, "at {t}");
    }
    // An older point is left out.
    let old = request(
        res.clone(),
        sum("cpu", "ns", DELTA, vec![point(f("main"), 0, 5, 100)]),
    );
    assert_eq!(st.fold(&old, now).stale, 1);
    let got = parse(&st.render(now));
    let base = [
        ("job", "checkout"),
        ("instance", "i-1"),
        ("otel_scope_name", "sc"),
        ("otel_scope_version", ""),
        ("otel_scope_schema_url", ""),
    ];
    let with = |fname: &str| {
        let mut l: Vec<_> = base.to_vec();
        l.push(("function_name", fname));
        labels(&l)
    };
    assert_eq!(got[&("cpu_nanoseconds_total".into(), with("main"))], 10.0);
    assert_eq!(got[&("cpu_nanoseconds_total".into(), with("parse"))], 7.0);
    assert_eq!(
        got[&(
            "target_info".into(),
            labels(&[("job", "checkout"), ("instance", "i-1")])
        )],
        1.0
    );

    // Cumulative: the last value is served.
    let mut st = Store::new(settings());
    for (t, v) in [(10, 5), (20, 9)] {
        let r = request(
            res.clone(),
            sum("cpu", "ns", CUMULATIVE, vec![point(f("main"), 1, t, v)]),
        );
        st.fold(&r, now);
    }
    assert_eq!(
        parse(&st.render(now))[&("cpu_nanoseconds_total".into(), with("main"))],
        9.0
    );

    // A non-monotonic delta cannot be served: refused, as the Collector
    // drops it.
    let mut m = sum("q", "", DELTA, vec![point(vec![], 0, 1, 1)]);
    if let Some(metric::Data::Sum(s)) = &mut m.data {
        s.is_monotonic = false;
    }
    assert_eq!(st.fold(&request(res, m), now).refused, 1);
}

#[test]
fn histograms_serve_cumulative_buckets_sum_and_count() {
    let mut st = Store::new(settings());
    let now = Instant::now();
    let h = |t: u64, counts: Vec<u64>, sum: f64| {
        let count = counts.iter().sum();
        Metric {
            name: "profile.duration".into(),
            unit: "s".into(),
            data: Some(metric::Data::Histogram(Histogram {
                aggregation_temporality: DELTA,
                data_points: vec![HistogramDataPoint {
                    time_unix_nano: t,
                    count,
                    sum: Some(sum),
                    explicit_bounds: vec![1.0, 2.5],
                    bucket_counts: counts,
                    ..Default::default()
                }],
            })),
            ..Default::default()
        }
    };
    st.fold(&request(vec![], h(1, vec![1, 0, 2], 9.0)), now);
    st.fold(&request(vec![], h(2, vec![0, 3, 1], 11.5)), now);
    let expo = Metric {
        name: "sizes".into(),
        data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
            aggregation_temporality: DELTA,
            data_points: vec![ExponentialHistogramDataPoint {
                time_unix_nano: 1,
                count: 4,
                sum: Some(10.0),
                scale: 3,
                positive: Some(exponential_histogram_data_point::Buckets {
                    offset: 0,
                    bucket_counts: vec![4],
                }),
                ..Default::default()
            }],
        })),
        ..Default::default()
    };
    st.fold(&request(vec![], expo.clone()), now);
    st.fold(&request(vec![], expo), now);
    let text = st.render(now);
    assert!(
        text.contains("# TYPE profile_duration_seconds histogram\n"),
        "{text}"
    );
    let got = parse(&text);
    let l = |le: Option<&str>| {
        let mut v = vec![
            ("otel_scope_name", "sc"),
            ("otel_scope_version", ""),
            ("otel_scope_schema_url", ""),
        ];
        if let Some(le) = le {
            v.push(("le", le));
        }
        labels(&v)
    };
    let b = |le| got[&("profile_duration_seconds_bucket".into(), l(Some(le)))];
    assert_eq!((b("1"), b("2.5"), b("+Inf")), (1.0, 4.0, 7.0));
    assert_eq!(got[&("profile_duration_seconds_sum".into(), l(None))], 20.5);
    assert_eq!(
        got[&("profile_duration_seconds_count".into(), l(None))],
        7.0
    );
    // An exponential histogram: +Inf, sum and count, as client_golang's
    // text encoder writes a native histogram.
    assert_eq!(got[&("sizes_bucket".into(), l(Some("+Inf")))], 8.0);
    assert_eq!(got[&("sizes_sum".into(), l(None))], 20.0);
    assert_eq!(got[&("sizes_count".into(), l(None))], 8.0);
}

/// Label values and help with quotes, backslashes and newlines come back
/// equal from an independent parser; const labels, the namespace and
/// resource attributes as labels are applied.
#[test]
fn escaping_survives_a_parser_and_every_label_source_applies() {
    let mut s = settings();
    s.namespace = "prof".into();
    s.const_labels = vec![("region".into(), "eu".into())];
    s.resource_to_telemetry = true;
    s.send_timestamps = true;
    let mut st = Store::new(s);
    let now = Instant::now();
    let nasty = "a \"quoted\" \\path\\\nnext line";
    let r = request(
        vec![kv("service.name", "svc"), kv("host.name", "h1")],
        sum(
            "cpu",
            "ns",
            DELTA,
            vec![point(vec![kv("frame", nasty)], 0, 2_000_000_000, 4)],
        ),
    );
    st.fold(&r, now);
    let text = st.render(now);
    assert!(
        text.contains("# HELP prof_cpu_nanoseconds_total CPU \"time\"\\\\ by\\nfunction\n"),
        "{text}"
    );
    assert!(text.contains("} 4 2000\n"), "timestamps in ms: {text}");
    // prometheus-parse leaves label values escaped; the official Python
    // parser unescapes them (below).
    let got = parse(&text);
    let escaped = "a \\\"quoted\\\" \\\\path\\\\\\nnext line";
    let want = labels(&[
        ("frame", escaped),
        ("host_name", "h1"),
        ("service_name", "svc"),
        ("job", "svc"),
        ("region", "eu"),
        ("otel_scope_name", "sc"),
        ("otel_scope_version", ""),
        ("otel_scope_schema_url", ""),
    ]);
    assert_eq!(
        got.get(&("prof_cpu_nanoseconds_total".into(), want)),
        Some(&4.0),
        "{got:#?}\n{text}"
    );
    assert_eq!(
        got[&(
            "prof_target_info".into(),
            labels(&[("job", "svc"), ("host_name", "h1")])
        )],
        1.0
    );
    let Some(python) = profcol_model::testing::python(&["prometheus_client"]) else {
        return;
    };
    let samples = python_parse(&python, &text);
    let cpu = samples
        .iter()
        .find(|s| s["name"] == "prof_cpu_nanoseconds_total")
        .unwrap_or_else(|| panic!("{samples:?}"));
    assert_eq!(cpu["labels"]["frame"], nasty);
    assert_eq!(cpu["labels"]["region"], "eu");
    assert_eq!(cpu["value"], 4.0);
}

/// The samples of an exposition as the official Python client's parser
/// reads them (tests/python/metrics_check.py).
fn python_parse(python: &std::path::Path, text: &str) -> Vec<serde_json::Value> {
    use std::io::Write;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/metrics_check.py");
    let mut child = std::process::Command::new(python)
        .arg(script)
        .arg("prom")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn series_are_bounded_counted_in_the_budget_and_expire() {
    let mut s = settings();
    s.max_series = 3;
    s.expiration = Duration::from_secs(60);
    let mut st = Store::new(s);
    let budget = MemoryBudget::new(1 << 20);
    st.attach(budget.try_admit(0).unwrap());
    let t0 = Instant::now();
    let pts = (0..5)
        .map(|i| point(vec![kv("f", &i.to_string())], 0, 1, 1))
        .collect();
    let f = st.fold(&request(vec![], sum("c", "", DELTA, pts)), t0);
    assert_eq!((f.accepted, f.refused), (3, 2));
    assert_eq!(st.len(), 3);
    assert!(budget.used() > 0);
    assert_eq!(budget.used(), st.bytes());
    // Known series still update at the limit.
    let again = st.fold(
        &request(
            vec![],
            sum("c", "", DELTA, vec![point(vec![kv("f", "0")], 0, 2, 1)]),
        ),
        t0,
    );
    assert_eq!((again.accepted, again.refused), (1, 0));
    // After metric_expiration without updates they are gone, and so is
    // their memory.
    let text = st.render(t0 + Duration::from_secs(61));
    assert!(!text.contains("c_total"), "{text}");
    assert!(st.is_empty());
    assert_eq!(budget.used(), 0);

    // A budget too small for a series refuses it.
    let mut st = Store::new(settings());
    let tiny = MemoryBudget::new(64);
    st.attach(tiny.try_admit(0).unwrap());
    let f = st.fold(
        &request(vec![], sum("c", "", DELTA, vec![point(vec![], 0, 1, 1)])),
        t0,
    );
    assert_eq!(f.refused, 1);
    assert!(st.is_empty());
}

/// Two attributes that become one label name cannot make one series
/// (client_golang refuses it): refused and counted.
#[test]
fn clashing_label_names_are_refused() {
    let mut st = Store::new(settings());
    let p = point(vec![kv("a.b", "1"), kv("a_b", "2")], 0, 1, 1);
    let f = st.fold(
        &request(vec![], sum("c", "", DELTA, vec![p])),
        Instant::now(),
    );
    assert_eq!(f.refused, 1);
}

fn create(yaml: &str) -> Result<Arc<dyn Exporter>, String> {
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "prometheus", yaml)
        .map_err(|e| e.to_string())?;
    profcol_pipeline::runtime::create_exporter(&*factory(), &cfg)
        .map(|(e, _)| e)
        .map_err(|e| e.to_string())
}

#[test]
fn config_errors_name_their_keys() {
    let err = create(
        "endpoint: nohost\nnamespace: '1x'\nconst_labels: {'bad-name': v}\nenable_open_metrics: true\ntranslation_strategy: Weird\nmax_series: 0\nsending_queue: {}",
    )
    .err()
    .unwrap();
    for want in [
        "exporters::prometheus::endpoint: invalid endpoint \"nohost\"",
        "exporters::prometheus::namespace: \"1x\" is not a valid",
        "exporters::prometheus::const_labels::bad-name: not a valid Prometheus label name",
        "exporters::prometheus::enable_open_metrics: is not supported",
        "exporters::prometheus::translation_strategy: invalid translation_strategy: Weird",
        "exporters::prometheus::max_series: must be at least 1",
        "exporters::prometheus: unknown field \"sending_queue\"",
    ] {
        assert!(err.contains(want), "{want}\nin\n{err}");
    }
    assert!(create("{}")
        .err()
        .unwrap()
        .contains("endpoint: must be specified"));
    let ok = create("endpoint: 127.0.0.1:0\nmetric_expiration: 1m\nadd_metric_suffixes: false\nresource_to_telemetry_conversion: {enabled: true}\nconst_labels: {env: prod}").unwrap();
    assert!(ok.exports_metrics() && !ok.exports_profiles());
}

/// `/metrics` is served over HTTP once started, until shutdown.
#[tokio::test]
async fn serves_metrics_over_http() {
    let exp = create("endpoint: 127.0.0.1:0").unwrap();
    let listeners = profcol_pipeline::net::Listeners::default();
    let ctx = profcol_pipeline::component::ExporterContext {
        id: "prometheus".into(),
        telemetry: Arc::new(profcol_pipeline::telemetry::Telemetry::new()),
        authenticators: Default::default(),
        budget: MemoryBudget::new(1 << 30),
    };
    listeners.scope(exp.start(&ctx)).await.unwrap();
    let addr = listeners.address("exporters::prometheus").unwrap();
    let r = request(
        vec![kv("service.name", "svc")],
        sum("cpu", "ns", DELTA, vec![point(vec![], 0, 1, 42)]),
    );
    let outcome = exp.export_metrics(&r, &ctx).await.unwrap();
    assert_eq!(outcome, ExportOutcome::delivered());
    let resp = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = resp.text().await.unwrap();
    let got = parse(&text);
    let want = labels(&[
        ("job", "svc"),
        ("otel_scope_name", "sc"),
        ("otel_scope_version", ""),
        ("otel_scope_schema_url", ""),
    ]);
    assert_eq!(got[&("cpu_nanoseconds_total".into(), want)], 42.0, "{text}");
    exp.shutdown().await;
    assert!(reqwest::get(format!("http://{addr}/metrics"))
        .await
        .is_err());
}
