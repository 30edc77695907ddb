//! The `service` section: extensions, pipelines and internal telemetry.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use figment::value::Value;
use serde::Deserialize;

use super::decode::decode_partial;
use super::expand::Originals;
use super::{ComponentId, ConfigErrors, Kind};

#[derive(Debug, Clone, Default)]
pub struct ServiceConfig {
    pub extensions: Vec<ComponentId>,
    /// Keyed by pipeline id (`profiles`, `profiles/gateway`).
    pub pipelines: BTreeMap<String, PipelineConfig>,
    pub telemetry: TelemetryConfig,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PipelineConfig {
    /// What it carries: the type of its id.
    pub signal: Signal,
    /// Receivers and connectors (a connector's id is never a receiver's).
    pub receivers: Vec<ComponentId>,
    pub processors: Vec<ComponentId>,
    /// Exporters and connectors.
    pub exporters: Vec<ComponentId>,
}

/// What a pipeline carries, named by the type of its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Signal {
    #[default]
    Profiles,
    /// Fed only by connectors (`signaltometrics`).
    Metrics,
}

impl Signal {
    pub fn parse(ty: &str) -> Option<Self> {
        match ty {
            "profiles" => Some(Self::Profiles),
            "metrics" => Some(Self::Metrics),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Profiles => "profiles",
            Self::Metrics => "metrics",
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// Where `/metrics` is served; `None` when metrics `level: none`.
    pub metrics_address: Option<SocketAddr>,
    /// Which metrics `/metrics` serves.
    pub metrics_level: MetricsLevel,
    /// `service.telemetry.logs.level`: debug, info, warn, error.
    pub logs_level: String,
    /// `service.telemetry.logs.encoding`: `console` (text lines) or `json`
    /// (one JSON object a line, for log pipelines).
    pub logs_encoding: LogsEncoding,
}

/// How log lines are written (`service.telemetry.logs.encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogsEncoding {
    #[default]
    Console,
    Json,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            metrics_address: Some(SocketAddr::from(([127, 0, 0, 1], DEFAULT_METRICS_PORT))),
            metrics_level: MetricsLevel::Normal,
            logs_level: "info".into(),
            logs_encoding: LogsEncoding::Console,
        }
    }
}

/// `service.telemetry.metrics.level`, with the Collector's meaning: `basic`
/// is the core Collector API's metrics (`otelcol_*`: receiver, processor and
/// exporter counts, queue gauges); `normal`, the Collector's default, adds
/// the component-specific ones (`profcol_*`: drops by reason, items).
/// `detailed` adds those that cost work of their own to measure (encoded
/// sizes). `none` turns `/metrics` off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MetricsLevel {
    None,
    Basic,
    Normal,
    Detailed,
}

const DEFAULT_METRICS_PORT: u16 = 8888;
const METRICS_LEVELS: [&str; 4] = ["none", "basic", "normal", "detailed"];
const LOG_LEVELS: [&str; 4] = ["debug", "info", "warn", "error"];
const LOG_ENCODINGS: [&str; 2] = ["console", "json"];

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct ServiceRaw {
    extensions: Vec<String>,
    pipelines: BTreeMap<String, PipelineRaw>,
    telemetry: TelemetryRaw,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct PipelineRaw {
    receivers: Vec<String>,
    processors: Vec<String>,
    exporters: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct TelemetryRaw {
    metrics: MetricsRaw,
    logs: LogsRaw,
    /// Attributes of the Collector's own telemetry: accepted, no effect
    /// (profcol's own telemetry, Prometheus text and log lines, carries no
    /// resource).
    #[allow(dead_code)]
    resource: Option<serde::de::IgnoredAny>,
    /// The Collector's own traces: checked, no effect (profcol makes none).
    traces: Option<TracesRaw>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct TracesRaw {
    level: Option<String>,
    #[allow(dead_code)]
    propagators: Option<Vec<String>>,
    #[allow(dead_code)]
    processors: Option<Vec<serde::de::IgnoredAny>>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct MetricsRaw {
    level: Option<String>,
    /// `host:port`, the Collector's older form.
    address: Option<String>,
    /// The newer form: `[{pull: {exporter: {prometheus: {host, port}}}}]`.
    readers: Option<Vec<ReaderRaw>>,
    /// Refused with the reason.
    views: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct LogsRaw {
    level: Option<String>,
    encoding: Option<String>,
    /// The Collector's zap sampling of repeated lines; profcol limits
    /// repeated warnings its own way (accepted, checked, no effect).
    #[allow(dead_code)]
    sampling: Option<LogsSamplingRaw>,
    /// zap's development mode (accepted, no effect).
    #[allow(dead_code)]
    development: Option<bool>,
    /// Only `[stderr]`, the Collector's default and where profcol's logs go.
    output_paths: Option<Vec<String>>,
    error_output_paths: Option<Vec<String>>,
    /// Accepted, no effect: profcol's log lines carry neither.
    #[allow(dead_code)]
    disable_caller: Option<bool>,
    #[allow(dead_code)]
    disable_stacktrace: Option<bool>,
    /// Refused with the reason.
    initial_fields: Option<serde::de::IgnoredAny>,
    processors: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct LogsSamplingRaw {
    #[allow(dead_code)]
    enabled: Option<bool>,
    #[allow(dead_code)]
    tick: Option<super::Duration>,
    #[allow(dead_code)]
    initial: Option<u64>,
    #[allow(dead_code)]
    thereafter: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct ReaderRaw {
    pull: Option<PullRaw>,
    periodic: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct PullRaw {
    exporter: PullExporterRaw,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct PullExporterRaw {
    prometheus: Option<PrometheusRaw>,
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct PrometheusRaw {
    host: Option<String>,
    port: Option<u16>,
}

/// The ids configured in each section, to check references against.
pub(super) type Defined<'a> = BTreeMap<Kind, BTreeSet<&'a ComponentId>>;

/// Decodes and checks `service`; `value` is `None` when the key is absent.
pub(super) fn parse_service(
    value: Option<&Value>,
    originals: &Originals,
    defined: &Defined<'_>,
    failed: &BTreeSet<String>,
    errs: &mut ConfigErrors,
) -> ServiceConfig {
    let empty = Value::from(figment::value::Dict::new());
    // Keys that fail to decode are reported and dropped; the rest is checked.
    let (raw, decode_errs) =
        decode_partial::<ServiceRaw>(value.unwrap_or(&empty), originals, "service");
    errs.extend(decode_errs);
    let Some(raw) = raw else {
        return ServiceConfig::default();
    };

    let ctx = ListCtx { defined, failed };
    let extensions = id_list(
        &raw.extensions,
        Kind::Extension,
        "service::extensions",
        &ctx,
        errs,
    );

    let mut pipelines = BTreeMap::new();
    if raw.pipelines.is_empty() {
        errs.push(
            "service::pipelines",
            "must have at least one profiles pipeline",
        );
    }
    for (name, p) in &raw.pipelines {
        let path = format!("service::pipelines::{name}");
        let signal = match ComponentId::parse(name) {
            Err(e) => {
                errs.push(path, e);
                continue;
            }
            Ok(id) => match Signal::parse(&id.ty) {
                Some(s) => s,
                None => {
                    errs.push(
                        path,
                        format!(
                            "only profiles and metrics pipelines are supported, not {:?}; profcol carries profiles, and metrics made of them by connectors: name it profiles[/NAME] or metrics[/NAME] (see README: Collector compatibility)",
                            id.ty
                        ),
                    );
                    continue;
                }
            },
        };
        let pipeline = PipelineConfig {
            signal,
            receivers: id_list(
                &p.receivers,
                Kind::Receiver,
                &format!("{path}::receivers"),
                &ctx,
                errs,
            ),
            processors: id_list(
                &p.processors,
                Kind::Processor,
                &format!("{path}::processors"),
                &ctx,
                errs,
            ),
            exporters: id_list(
                &p.exporters,
                Kind::Exporter,
                &format!("{path}::exporters"),
                &ctx,
                errs,
            ),
        };
        if p.receivers.is_empty() {
            errs.push(&path, "must have at least one receiver");
        }
        if p.exporters.is_empty() {
            errs.push(&path, "must have at least one exporter");
        }
        pipelines.insert(name.clone(), pipeline);
    }

    ServiceConfig {
        extensions,
        pipelines,
        telemetry: telemetry(&raw.telemetry, errs),
    }
}

struct ListCtx<'a> {
    defined: &'a Defined<'a>,
    /// Paths whose `${...}` failed to expand (already reported).
    failed: &'a BTreeSet<String>,
}

/// Parses a list of ids, each defined in `kind`'s section and listed once.
fn id_list(
    names: &[String],
    kind: Kind,
    path: &str,
    ctx: &ListCtx<'_>,
    errs: &mut ConfigErrors,
) -> Vec<ComponentId> {
    let noun = kind_noun(kind);
    let mut out: Vec<ComponentId> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if ctx.failed.contains(&format!("{path}::{i}")) {
            continue;
        }
        let id = match ComponentId::parse(name) {
            Ok(id) => id,
            Err(e) => {
                errs.push(path, e);
                continue;
            }
        };
        if out.contains(&id) {
            errs.push(path, format!("{noun} {name:?} is listed more than once"));
            continue;
        }
        let defined = |k: Kind| ctx.defined.get(&k).is_some_and(|ids| ids.contains(&id));
        // Receivers and exporters lists name connectors too.
        let connector = matches!(kind, Kind::Receiver | Kind::Exporter) && defined(Kind::Connector);
        if !connector && !defined(kind) {
            errs.push(
                path,
                format!("references {noun} {name:?} which is not configured"),
            );
        }
        out.push(id);
    }
    out
}

pub(super) fn kind_noun(kind: Kind) -> &'static str {
    match kind {
        Kind::Receiver => "receiver",
        Kind::Processor => "processor",
        Kind::Exporter => "exporter",
        Kind::Extension => "extension",
        Kind::Connector => "connector",
    }
}

fn telemetry(raw: &TelemetryRaw, errs: &mut ConfigErrors) -> TelemetryConfig {
    let mut out = TelemetryConfig::default();

    if let Some(level) = &raw.logs.level {
        match one_of(level, &LOG_LEVELS) {
            Some(l) => out.logs_level = l.to_owned(),
            None => errs.push(
                "service::telemetry::logs::level",
                format!(
                    "invalid level {level:?}, expected one of {}",
                    LOG_LEVELS.join(", ")
                ),
            ),
        }
    }

    if let Some(encoding) = &raw.logs.encoding {
        match one_of(encoding, &LOG_ENCODINGS) {
            Some("json") => out.logs_encoding = LogsEncoding::Json,
            Some(_) => out.logs_encoding = LogsEncoding::Console,
            None => errs.push(
                "service::telemetry::logs::encoding",
                format!(
                    "invalid encoding {encoding:?}, expected one of {}",
                    LOG_ENCODINGS.join(", ")
                ),
            ),
        }
    }

    for (key, paths) in [
        ("output_paths", &raw.logs.output_paths),
        ("error_output_paths", &raw.logs.error_output_paths),
    ] {
        if paths
            .as_ref()
            .is_some_and(|p| p.iter().any(|p| p != "stderr"))
        {
            errs.push(
                format!("service::telemetry::logs::{key}"),
                "only [stderr] is supported: profcol writes its logs to stderr (the Collector's default); redirect stderr to keep them elsewhere",
            );
        }
    }
    if raw.logs.initial_fields.is_some() {
        errs.push(
            "service::telemetry::logs::initial_fields",
            "is not supported: profcol's log lines carry no fields of their own; add them where the logs are collected",
        );
    }
    if raw.logs.processors.is_some() {
        errs.push(
            "service::telemetry::logs::processors",
            "is not supported: profcol does not export its logs; they go to stderr, to be collected from there",
        );
    }
    if let Some(level) = raw.traces.as_ref().and_then(|t| t.level.as_ref()) {
        if one_of(level, &METRICS_LEVELS).is_none() {
            errs.push(
                "service::telemetry::traces::level",
                format!(
                    "invalid level {level:?}, expected one of {}",
                    METRICS_LEVELS.join(", ")
                ),
            );
        }
    }

    let m = &raw.metrics;
    if let Some(level) = &m.level {
        match one_of(level, &METRICS_LEVELS) {
            Some(l) => {
                out.metrics_level = match l {
                    "none" => MetricsLevel::None,
                    "basic" => MetricsLevel::Basic,
                    "normal" => MetricsLevel::Normal,
                    _ => MetricsLevel::Detailed,
                }
            }
            None => errs.push(
                "service::telemetry::metrics::level",
                format!(
                    "invalid level {level:?}, expected one of {}",
                    METRICS_LEVELS.join(", ")
                ),
            ),
        }
    }
    let disabled = out.metrics_level == MetricsLevel::None;
    if m.views.is_some() {
        errs.push(
            "service::telemetry::metrics::views",
            "are not supported: profcol serves its metrics as they are; drop or rename them where they are scraped",
        );
    }
    if !disabled && m.address.is_none() && m.readers.as_ref().is_some_and(Vec::is_empty) {
        errs.push(
            "service::telemetry::metrics::readers",
            "collector telemetry metrics reader should exist when metric level is not none (set level: none to turn /metrics off)",
        );
    }

    let address = match (&m.address, &m.readers) {
        (Some(_), Some(_)) => {
            errs.push(
                "service::telemetry::metrics",
                "set either address or readers, not both",
            );
            out.metrics_address
        }
        (Some(addr), None) => match parse_host_port(addr) {
            Ok(a) => Some(a),
            Err(e) => {
                errs.push("service::telemetry::metrics::address", e);
                out.metrics_address
            }
        },
        (None, Some(readers)) => readers_address(readers, errs),
        (None, None) => out.metrics_address,
    };
    out.metrics_address = if disabled { None } else { address };
    out
}

/// The address of the one Prometheus pull reader; `None` for no readers.
fn readers_address(readers: &[ReaderRaw], errs: &mut ConfigErrors) -> Option<SocketAddr> {
    const PATH: &str = "service::telemetry::metrics::readers";
    if readers.len() > 1 {
        errs.push(PATH, "only one reader is supported");
    }
    let reader = readers.first()?;
    let path = format!("{PATH}::0");
    if reader.periodic.is_some() {
        errs.push(
            format!("{path}::periodic"),
            "periodic readers are not supported; use a pull reader with a prometheus exporter",
        );
        return None;
    }
    let Some(pull) = &reader.pull else {
        errs.push(path, "must have a pull reader");
        return None;
    };
    let Some(prom) = &pull.exporter.prometheus else {
        errs.push(
            format!("{path}::pull::exporter"),
            "must have a prometheus exporter",
        );
        return None;
    };
    let port = prom.port.unwrap_or(DEFAULT_METRICS_PORT);
    let host = prom.host.as_deref().unwrap_or("localhost");
    match parse_host(host) {
        Ok(ip) => Some(SocketAddr::new(ip, port)),
        Err(e) => {
            errs.push(format!("{path}::pull::exporter::prometheus::host"), e);
            None
        }
    }
}

/// The allowed spelling of `s` (levels are case-insensitive, as in the Collector).
fn one_of(s: &str, allowed: &[&'static str]) -> Option<&'static str> {
    allowed.iter().copied().find(|a| a.eq_ignore_ascii_case(s))
}

/// `host:port` where host is an IP, `localhost`, or empty (all interfaces,
/// as Go reads `:8888`).
pub(super) fn parse_host_port(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("invalid address {s:?}: expected host:port"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("invalid address {s:?}: invalid port {port:?}"))?;
    let ip = if host.is_empty() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        parse_host(host).map_err(|e| format!("invalid address {s:?}: {e}"))?
    };
    Ok(SocketAddr::new(ip, port))
}

/// An IP address (IPv6 with or without brackets) or `localhost`. Other host
/// names are refused rather than resolved while loading the config.
fn parse_host(host: &str) -> Result<IpAddr, String> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse()
        .map_err(|_| format!("host {host:?} must be an IP address or localhost"))
}
