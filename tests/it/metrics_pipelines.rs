//! Metrics pipelines: fed only by connectors, no processors, exporters
//! that take metrics.

fn errors(yaml: &str) -> Vec<String> {
    match profcol::app::load_str(yaml) {
        Ok(_) => Vec::new(),
        Err(e) => e.0.iter().map(|e| e.to_string()).collect(),
    }
}

#[test]
fn a_metrics_pipeline_is_checked_at_its_key_paths() {
    let yaml = r#"
receivers:
  otlp:
processors:
  batch:
exporters:
  debug:
  pprof:
    directory: /tmp/profcol-pprof-never-written
  file:
    path: /tmp/profcol-metrics-never-written.jsonl
  otlp:
    endpoint: localhost:4317
  otlphttp:
    endpoint: http://localhost:4318
service:
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [debug]
    metrics:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug, pprof, file, otlp, otlphttp]
"#;
    let errs = errors(yaml);
    for want in [
        r#"service::pipelines::metrics::receivers: receiver "otlp" does not support metrics: a metrics pipeline is fed only by connectors (signaltometrics)"#,
        "service::pipelines::metrics::processors: a metrics pipeline takes no processors yet",
        r#"service::pipelines::metrics::exporters: exporter "pprof" does not support metrics; of the exporters, otlp, otlphttp, file, debug and prometheus do"#,
    ] {
        assert!(
            errs.iter().any(|e| e.starts_with(want)),
            "{want}\nin {errs:#?}"
        );
    }
    // debug, file, otlp and otlphttp take metrics: no error names them.
    for ok in ["debug", "file", "otlp", "otlphttp"] {
        let named = format!("exporter \"{ok}\"");
        assert!(
            !errs.iter().any(|e| e.contains(&named)),
            "{named} in {errs:#?}"
        );
    }
    assert_eq!(errs.len(), 3, "{errs:#?}");
}

#[test]
fn traces_and_logs_pipelines_are_still_refused() {
    let yaml = "receivers: {otlp: }\nexporters: {debug: }\nservice: {pipelines: {logs: {receivers: [otlp], exporters: [debug]}}}";
    let errs = errors(yaml);
    assert!(
        errs.iter().any(|e| e.starts_with(
            r#"service::pipelines::logs: only profiles and metrics pipelines are supported, not "logs""#
        )),
        "{errs:#?}"
    );
}

mod grpc {
    use std::sync::{Arc, Mutex};

    use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
        MetricsService, MetricsServiceServer,
    };
    use profcol_model::proto::metrics::*;
    use profcol_pipeline::component::{ExportOutcome, ExporterContext};
    use profcol_pipeline::config::{ComponentConfig, Kind};
    use profcol_pipeline::telemetry::Telemetry;
    use tokio_util::sync::CancellationToken;
    use tonic::{Request, Response, Status};

    #[derive(Clone, Default)]
    struct Got(Arc<Mutex<Vec<ExportMetricsServiceRequest>>>);

    #[tonic::async_trait]
    impl MetricsService for Got {
        async fn export(
            &self,
            req: Request<ExportMetricsServiceRequest>,
        ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
            let req = req.into_inner();
            let rejected = point_count(&req) as i64 - 1;
            self.0.lock().unwrap().push(req);
            Ok(Response::new(ExportMetricsServiceResponse {
                partial_success: Some(ExportMetricsPartialSuccess {
                    rejected_data_points: rejected,
                    error_message: String::new(),
                }),
            }))
        }
    }

    /// The `otlp` exporter calls MetricsService/Export (gzip by default);
    /// the server's partial success counts rejected points.
    #[tokio::test]
    async fn the_otlp_exporter_calls_metrics_service_export() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let got = Got::default();
        let svc = MetricsServiceServer::new(got.clone())
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
        let stop = CancellationToken::new();
        let s = stop.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(svc)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    s.cancelled_owned(),
                )
                .await
                .unwrap();
        });
        let cfg = ComponentConfig::from_yaml(
            Kind::Exporter,
            "otlp",
            &format!("{{endpoint: 'http://{addr}', tls: {{insecure: true}}}}"),
        )
        .unwrap();
        let (exp, _) =
            profcol_pipeline::runtime::create_exporter(&*profcol_exporters::otlp::factory(), &cfg)
                .unwrap();
        assert!(exp.exports_metrics());
        let point = |v: f64| NumberDataPoint {
            value: Some(number_data_point::Value::AsDouble(v)),
            ..Default::default()
        };
        let req = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![Metric {
                        name: "g".into(),
                        data: Some(metric::Data::Gauge(Gauge {
                            data_points: vec![point(1.0), point(2.0), point(3.0)],
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let ctx = ExporterContext {
            id: "otlp".into(),
            telemetry: Arc::new(Telemetry::new()),
            authenticators: Default::default(),
            budget: profcol_model::memory::MemoryBudget::new(1 << 30),
        };
        exp.start(&ctx).await.unwrap();
        let outcome = exp.export_metrics(&req, &ctx).await.unwrap();
        assert_eq!(outcome, ExportOutcome::rejected(2));
        assert_eq!(*got.0.lock().unwrap(), vec![req]);
        stop.cancel();
    }
}
