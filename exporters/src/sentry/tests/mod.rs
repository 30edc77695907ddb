//! Tests of the `sentry` exporter against an in-process Sentry.

mod config;
mod fan_out;
mod rate_limits;
mod responses;
mod round_trip;
mod runtime;
mod sentry_view;

use std::sync::Arc;

use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_pipeline::component::ExporterContext;
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::telemetry::Telemetry;

use super::*;

pub(super) use profcol_model::testing::fixture;

/// `tests/fixtures/otlp/go-cpu.otlp.bin`: a Go CPU profile (pprof) as OTLP,
/// one Profile per sample type, aggregated values and no timestamps.
pub(super) fn go_cpu() -> ProfilesData {
    ProfilesData::decode(&fixture("otlp/go-cpu.otlp.bin")[..]).unwrap()
}

/// One go-cpu Profile over 30 s: one chunk, nothing dropped.
pub(super) fn long_profile_for_runtime() -> ProfilesData {
    let mut data = go_cpu();
    let profiles = &mut data.resource_profiles[0].scope_profiles[0].profiles;
    profiles.truncate(1);
    profiles[0].duration_nano = 30_000_000_000;
    data
}

/// An exporter for `dsn`, configured by YAML on top of the defaults.
pub(super) fn exporter(dsn: &str, yaml: &str) -> SentryExporter {
    let yaml = format!("dsn: {dsn}\n{yaml}");
    let cfg = ComponentConfig::from_yaml(Kind::Exporter, "sentry", &yaml).unwrap();
    let c: SentryExporterConfig = cfg.decode().unwrap();
    let dsn = c.validate(&cfg).unwrap();
    SentryExporter::new(
        &c,
        dsn,
        std::time::Duration::from_secs(30),
        "exporters::sentry",
    )
    .unwrap()
}

pub(super) fn ctx() -> ExporterContext {
    ExporterContext {
        id: "sentry".into(),
        telemetry: Arc::new(Telemetry::new()),
        authenticators: Default::default(),
        budget: profcol_model::memory::MemoryBudget::new(1 << 30),
    }
}
