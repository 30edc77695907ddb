//! `exporters: loadbalancing:` with the Collector's keys: `routing_key`,
//! `protocol: {otlp: ...}` (the `otlp` exporter's keys, its `endpoint`
//! replaced per backend) and exactly one `resolver`. The top-level
//! `timeout`, `retry_on_failure` and `sending_queue` are the runtime's.

use std::fmt;
use std::time::Duration as StdDuration;

use figment::value::{Dict, Value};
use serde::{de, Deserialize, Deserializer, Serialize};

use profcol_pipeline::config::{
    ComponentConfig, ConfigErrors, Duration, ExporterSettingsKeys, EXPORTER_SETTINGS_KEYS,
};

use crate::otlp::OtlpExporterConfig;

/// The port of a backend named without one (the Collector's, OTLP/gRPC).
pub const DEFAULT_PORT: u16 = 4317;

/// The keys of the section other than `protocol`, which is decoded apart
/// (it holds a whole `otlp` exporter section).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct LoadBalancingConfig {
    pub routing_key: RoutingKey,
    pub resolver: ResolverConfig,
}

/// What decides the backend of a profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoutingKey {
    /// The resource's `service.name`: a service always reaches one backend.
    #[serde(rename = "service")]
    Service,
    /// Every resource attribute (order does not matter).
    #[serde(rename = "resource")]
    Resource,
    /// The trace id of the first sample (in order) that links to a trace,
    /// else `service.name`: profiles of one trace meet on one backend.
    #[default]
    #[serde(rename = "traceID")]
    TraceId,
    /// profcol's own: the profiler session (`sentry.profiler_id`, on the
    /// profile or its resource), else `service.instance.id`, else
    /// `service.name`: the chunks of one session meet on one backend.
    #[serde(rename = "profile_session")]
    ProfileSession,
}

impl RoutingKey {
    /// Whether profiles of one resource may go to different backends.
    pub fn per_profile(self) -> bool {
        matches!(self, RoutingKey::TraceId | RoutingKey::ProfileSession)
    }
}

impl fmt::Display for RoutingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RoutingKey::Service => "service",
            RoutingKey::Resource => "resource",
            RoutingKey::TraceId => "traceID",
            RoutingKey::ProfileSession => "profile_session",
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct ResolverConfig {
    #[serde(rename = "static")]
    pub static_: Option<StaticResolver>,
    pub dns: Option<DnsResolver>,
    /// Accepted as the Collector writes it, refused by `validate`.
    pub k8s: Option<K8sResolver>,
    /// The Collector's AWS Cloud Map resolver: read so that it is refused
    /// with the reason.
    pub aws_cloud_map: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct StaticResolver {
    /// `host:port`, or `host` for port 4317.
    pub hostnames: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct DnsResolver {
    /// Resolved to every address, each a backend at `port`.
    pub hostname: String,
    pub port: Port,
    /// How often to resolve again.
    pub interval: Duration,
    /// How long one resolution may take.
    pub timeout: Duration,
}

impl Default for DnsResolver {
    fn default() -> Self {
        Self {
            hostname: String::new(),
            port: Port(DEFAULT_PORT),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(1),
        }
    }
}

/// The Collector's `k8s` resolver keys, so that its config decodes and
/// the refusal names the resolver rather than an unknown key.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct K8sResolver {
    pub service: String,
    pub ports: Vec<u16>,
    pub timeout: Option<Duration>,
    pub return_hostnames: bool,
}

/// A port, written as a number or (as the Collector's `dns.port`) a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Port(pub u16);

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Port;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a port number (1-65535)")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Port, E> {
                match u16::try_from(v) {
                    Ok(p) if p > 0 => Ok(Port(p)),
                    _ => Err(E::invalid_value(de::Unexpected::Unsigned(v), &self)),
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Port, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
                }
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Port, E> {
                match v.parse::<u64>() {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Where the backends come from, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolver {
    /// `host:port` of each, normalised, sorted, without duplicates.
    Static(Vec<String>),
    Dns {
        hostname: String,
        port: u16,
        interval: StdDuration,
        timeout: StdDuration,
    },
}

impl Resolver {
    /// The `resolver` label of the metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Resolver::Static(_) => "static",
            Resolver::Dns { .. } => "dns",
        }
    }
}

/// The whole section, decoded and checked.
#[derive(Debug, Clone)]
pub struct Decoded {
    pub routing_key: RoutingKey,
    /// The `otlp` template; each backend gets a copy with its `endpoint`.
    pub otlp: OtlpExporterConfig,
    /// `protocol::otlp::timeout`: one call to one backend. `None`: the
    /// exporter's own `timeout`.
    pub backend_timeout: Option<StdDuration>,
    pub resolver: Resolver,
}

/// Decodes `cfg` (without the runtime's keys), reporting every problem at
/// its key path, `protocol::otlp::...` included.
pub(super) fn decode(cfg: &ComponentConfig) -> Result<Decoded, ConfigErrors> {
    let (rest, protocol) = cfg.split_off(&["protocol"]);
    let top = rest.decode_checked(|c: &LoadBalancingConfig| c.resolver.check(cfg));
    let otlp = decode_protocol(cfg, &protocol);
    match (top, otlp) {
        (Ok((c, resolver)), Ok((otlp, backend_timeout))) => Ok(Decoded {
            routing_key: c.routing_key,
            otlp,
            backend_timeout,
            resolver,
        }),
        (top, otlp) => {
            let mut errs = top.err().unwrap_or_default();
            errs.extend(otlp.err().unwrap_or_default());
            Err(errs)
        }
    }
}

impl ResolverConfig {
    fn check(&self, cfg: &ComponentConfig) -> Result<Resolver, ConfigErrors> {
        let set: Vec<&str> = [
            ("static", self.static_.is_some()),
            ("dns", self.dns.is_some()),
            ("k8s", self.k8s.is_some()),
            ("aws_cloud_map", self.aws_cloud_map.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, on)| on.then_some(k))
        .collect();
        match set.as_slice() {
            [] => {
                return Err(cfg.error("resolver", "exactly one of static, dns or k8s is required"))
            }
            [_] => {}
            more => {
                return Err(cfg.error(
                    "resolver",
                    format!(
                        "{} are all set; exactly one resolver is allowed",
                        more.join(" and ")
                    ),
                ))
            }
        }
        if self.k8s.is_some() {
            return Err(cfg.error(
                "resolver::k8s",
                "k8s resolver is not built in; use dns with a headless Service",
            ));
        }
        if self.aws_cloud_map.is_some() {
            return Err(cfg.error(
                "resolver::aws_cloud_map",
                "aws_cloud_map resolver is not built in; use static, or dns with the service's DNS name",
            ));
        }
        let mut errs = ConfigErrors::default();
        if let Some(s) = &self.static_ {
            let at = cfg.key_path("resolver::static::hostnames");
            if s.hostnames.is_empty() {
                errs.push(&at, "must list at least one backend");
            }
            let mut endpoints = Vec::with_capacity(s.hostnames.len());
            for (i, h) in s.hostnames.iter().enumerate() {
                match normalise_endpoint(h) {
                    Ok(e) if endpoints.contains(&e) => {
                        errs.push(format!("{at}::{i}"), format!("{e} is listed twice"))
                    }
                    Ok(e) => endpoints.push(e),
                    Err(e) => errs.push(format!("{at}::{i}"), e),
                }
            }
            endpoints.sort_unstable();
            return errs.into_result(Resolver::Static(endpoints));
        }
        let d = self.dns.as_ref().expect("one resolver is set");
        let at = |k: &str| cfg.key_path(&format!("resolver::dns::{k}"));
        if d.hostname.trim().is_empty() {
            errs.push(at("hostname"), "is required");
        } else if d.hostname.contains(':') || d.hostname.contains('/') {
            errs.push(
                at("hostname"),
                format!(
                    "{:?} is not a host name (the port goes in `port`)",
                    d.hostname
                ),
            );
        }
        if d.interval.get().is_zero() {
            errs.push(at("interval"), "must be greater than 0");
        }
        if d.timeout.get().is_zero() {
            errs.push(at("timeout"), "must be greater than 0");
        }
        errs.into_result(Resolver::Dns {
            hostname: d.hostname.trim().to_owned(),
            port: d.port.0,
            interval: d.interval.get(),
            timeout: d.timeout.get(),
        })
    }
}

/// `host:port` from a `hostnames` entry: `host` gets port 4317; an IPv6
/// address needs brackets (`[::1]:4317`).
pub fn normalise_endpoint(s: &str) -> Result<String, String> {
    let s = s.trim();
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(format!("{s:?}: unclosed '[' in an IPv6 address"));
        };
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("{s:?}: expected ':port' after the IPv6 address"))?,
            ),
        };
        (format!("[{host}]"), port)
    } else if s.matches(':').count() > 1 {
        return Err(format!(
            "{s:?}: write an IPv6 address in brackets, as [::1]:4317"
        ));
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h.to_owned(), Some(p)),
            None => (s.to_owned(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("{s:?}: the host is missing"));
    }
    if host.contains('/') {
        return Err(format!(
            "{s:?}: expected host:port, without a scheme or path"
        ));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(format!("{s:?}: invalid port {p:?}")),
        },
    };
    Ok(format!("{host}:{port}"))
}

/// `protocol: {otlp: {...}}`: the `otlp` exporter's own keys, checked as
/// that exporter checks them, with errors at `protocol::otlp::...`.
fn decode_protocol(
    cfg: &ComponentConfig,
    protocol: &ComponentConfig,
) -> Result<(OtlpExporterConfig, Option<StdDuration>), ConfigErrors> {
    let at = |k: &str| cfg.key_path(&format!("protocol{k}"));
    let otlp_value = match dict_get(&protocol.value, "protocol") {
        None | Some(Value::Empty(..)) => None,
        Some(Value::Dict(_, d)) => {
            let mut errs = ConfigErrors::default();
            for k in d.keys().filter(|k| *k != "otlp") {
                errs.push(
                    at(&format!("::{k}")),
                    "unknown protocol; only otlp is supported",
                );
            }
            if !errs.is_empty() {
                return Err(errs);
            }
            d.get("otlp").cloned()
        }
        Some(_) => return Err(ConfigErrors::one(at(""), "must be a map")),
    };
    let value = match otlp_value {
        None | Some(Value::Empty(..)) => Value::from(Dict::new()),
        Some(v @ Value::Dict(..)) => v,
        Some(_) => return Err(ConfigErrors::one(at("::otlp"), "must be a map")),
    };
    let prefix = ["protocol".to_owned(), "otlp".to_owned()];
    let sub = ComponentConfig {
        id: cfg.id.clone(),
        kind: cfg.kind,
        value,
        originals: protocol
            .originals
            .iter()
            .filter_map(|(p, v)| Some((p.strip_prefix(&prefix[..])?.to_vec(), v.clone())))
            .collect(),
    };
    let (rest, keys) = sub.split_off(&EXPORTER_SETTINGS_KEYS);
    let otlp = rest.decode_checked(|c: &OtlpExporterConfig| {
        // The endpoint is each backend's; check the rest as the otlp
        // exporter would with one (TLS files, headers).
        let probe = OtlpExporterConfig {
            endpoint: "backend:4317".into(),
            ..c.clone()
        };
        ConfigErrors::both(
            probe.validate(&rest),
            crate::otlp::OtlpExporter::new(
                &probe,
                &rest,
                StdDuration::from_secs(1),
                std::sync::Arc::new(crate::lookup::SystemLookup),
            )
            .map(|_| ()),
        )
        .map(|_| ())
    });
    let settings = keys.decode_checked(|k: &ExporterSettingsKeys| {
        let mut errs = ConfigErrors::default();
        if k.timeout.is_some_and(|t| t.get().is_zero()) {
            errs.push(sub.key_path("timeout"), "must be greater than 0");
        }
        // One retry loop, the exporter's own: a retry re-routes what is
        // left to the backends of the moment, which a retry inside one
        // backend's exporter could not.
        if k.retry_on_failure.as_ref().is_some_and(|r| r.enabled) {
            errs.push(
                sub.key_path("retry_on_failure"),
                "per-backend retries are not supported; set retry_on_failure on the \
                 loadbalancing exporter itself (its retries re-route to the current backends)",
            );
        }
        if k.sending_queue.as_ref().is_some_and(|q| q.enabled) {
            errs.push(
                sub.key_path("sending_queue"),
                "per-backend queues are not supported; set sending_queue on the \
                 loadbalancing exporter itself",
            );
        }
        errs.into_result(k.timeout.map(Duration::get))
    });
    let relocate = |e: ConfigErrors| relocate(e, &cfg.path(), "protocol::otlp");
    match (otlp, settings) {
        (Ok((mut otlp, ())), Ok((_, timeout))) => {
            if !otlp.endpoint.is_empty() {
                tracing::warn!(
                    exporter = %cfg.id,
                    endpoint = %otlp.endpoint,
                    "protocol::otlp::endpoint is replaced by each backend's address"
                );
            }
            otlp.endpoint.clear();
            Ok((otlp, timeout))
        }
        (otlp, settings) => {
            let mut errs = otlp.err().map(relocate).unwrap_or_default();
            errs.extend(settings.err().map(relocate).unwrap_or_default());
            Err(errs)
        }
    }
}

fn dict_get<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Dict(_, d) => d.get(key),
        _ => None,
    }
}

/// Errors of a section decoded on its own, moved to where it sits:
/// `exporters::lb::tls` -> `exporters::lb::protocol::otlp::tls`.
fn relocate(mut errs: ConfigErrors, base: &str, under: &str) -> ConfigErrors {
    for e in &mut errs.0 {
        if let Some(rest) = e.path.strip_prefix(base) {
            if rest.is_empty() || rest.starts_with("::") {
                e.path = format!("{base}::{under}{rest}");
            }
        }
    }
    errs
}
