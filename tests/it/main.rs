//! The integration tests of the `profcol` package, one binary (`cargo test
//! --test it`) with a module per subject: one link of the test harness and
//! its dependencies instead of one per file. Select a module with its path:
//! `cargo test --test it sentry_forward::`.

// A test binary has no surface for other crates to use.
#![allow(unreachable_pub)]

mod common;

mod async_profiler;
mod attributes;
mod batch;
mod cli;
mod compressed_passthrough;
mod connectors;
mod deploy;
mod docs;
mod durable_queue;
mod file_exporter;
mod gateway_tiers;
mod harness;
mod hostile_input;
mod hostile_values;
mod k8sattributes;
mod kafka;
mod loadbalancing;
mod memory;
mod metrics_pipelines;
mod otelcol_config;
mod otelcol_interop;
mod otlp_e2e;
mod otlp_http;
mod ottl_differential;
mod pprof_receiver;
mod profilez;
mod prometheus_exporter;
mod pyroscope_e2e;
mod pyroscope_formats;
mod pyroscope_go;
mod pyroscope_jfr;
mod reload;
mod resourcedetection;
mod round_robin;
mod sentry_android;
mod sentry_forward;
mod sentry_java;
mod sentry_perfetto;
mod sentry_pprof;
mod sentry_roundtrip;
mod sentry_tls;
mod signaltometrics;
mod symbolizer;
