//! The Collector's process metrics and `target_info`, which its dashboards
//! read: uptime, CPU, resident memory and the allocator's heap, read at
//! each scrape rather than polled.
//!
//! Of the Go runtime's, `heap_alloc_bytes` is served as the memory the
//! allocator (mimalloc) has committed for the heap, which includes freed
//! pages it keeps; `total_alloc_bytes` and `total_sys_memory_bytes` have no
//! counterpart without counting every allocation, and are not served.

use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Who serves the metrics: `target_info`'s labels, as the Collector sets
/// them from its build and `service.telemetry.resource`.
#[derive(Debug, Clone)]
pub struct Identity {
    pub service_name: String,
    pub service_version: String,
    pub service_instance_id: String,
}

impl Default for Identity {
    fn default() -> Self {
        Self {
            service_name: "profcol".into(),
            service_version: env!("CARGO_PKG_VERSION").into(),
            service_instance_id: uuid::Uuid::new_v4().to_string(),
        }
    }
}

#[derive(Debug)]
pub(super) struct Process {
    start: Instant,
    identity: Identity,
}

impl Process {
    pub(super) fn new(identity: Identity) -> Self {
        Self {
            start: Instant::now(),
            identity,
        }
    }
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> std::fmt::Result {
    let m = ConstCounter::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> std::fmt::Result {
    let m = ConstGauge::new(v);
    m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
}

impl Collector for Process {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let uptime = self.start.elapsed().as_secs_f64();
        counter(
            &mut e,
            "otelcol_process_uptime",
            "Uptime of the process",
            uptime,
        )?;
        if let Some(cpu) = profcol_model::memory::cpu_seconds() {
            counter(
                &mut e,
                "otelcol_process_cpu_seconds",
                "Total CPU user and system time in seconds",
                cpu,
            )?;
        }
        let bytes = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        if let Some(rss) = profcol_model::memory::resident_bytes() {
            gauge(
                &mut e,
                "otelcol_process_memory_rss",
                "Total physical memory (resident set size)",
                bytes(rss),
            )?;
        }
        if let Some(heap) = profcol_model::memory::allocator_committed() {
            gauge(
                &mut e,
                "otelcol_process_runtime_heap_alloc_bytes",
                "Bytes the allocator has committed for heap objects (live, and freed pages it keeps)",
                bytes(heap),
            )?;
        }
        let info = ConstGauge::new(1i64);
        let labels = [
            (
                "service_instance_id",
                self.identity.service_instance_id.as_str(),
            ),
            ("service_name", self.identity.service_name.as_str()),
            ("service_version", self.identity.service_version.as_str()),
        ];
        let mut enc =
            e.encode_descriptor("target_info", "Target metadata", None, info.metric_type())?;
        info.encode(enc.encode_family(&labels)?)
    }
}
