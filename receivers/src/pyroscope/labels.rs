//! Pyroscope's series labels and where they go in OTLP: the `name` query
//! parameter's grammar (`APP{key=value,...}`), Push's label pairs, the
//! semantic-convention names of the labels SDKs and agents set, and the
//! `spyName` of the SDK.

use profcol_model::proto::{any_value::Value, AnyValue, KeyValue};

/// The `name` parameter: the application and its labels in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    pub app: String,
    pub labels: Vec<(String, String)>,
}

/// Parses `APP[{key=value,...}]` as Pyroscope's `labelset.Parse` does:
/// spaces around names, keys and values are trimmed; the application is
/// `[A-Za-z0-9_.\-/]+`, keys `[A-Za-z0-9_.]+`; values may hold anything but
/// `,` and `}` (there is no escaping).
pub fn parse_name(name: &str) -> Result<Name, String> {
    let (app, rest) = match name.find('{') {
        Some(open) => (&name[..open], Some(&name[open + 1..])),
        None => (name, None),
    };
    let app = app.trim();
    if app.is_empty() {
        return Err(format!("name {name:?}: the application name is empty"));
    }
    if let Some(c) = app
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')))
    {
        return Err(format!(
            "name {name:?}: {c:?} is not allowed in an application name (letters, digits, '_', '.', '-', '/')"
        ));
    }
    let mut labels = Vec::new();
    if let Some(rest) = rest {
        let Some(close) = rest.find('}') else {
            return Err(format!("name {name:?}: '{{' is not closed by '}}'"));
        };
        if !rest[close + 1..].trim().is_empty() {
            return Err(format!("name {name:?}: text after the closing '}}'"));
        }
        for pair in rest[..close].split(',') {
            if pair.trim().is_empty() {
                continue;
            }
            let Some((k, v)) = pair.split_once('=') else {
                return Err(format!("name {name:?}: label {:?} has no '='", pair.trim()));
            };
            let (k, v) = (k.trim(), v.trim());
            check_key(k).map_err(|e| format!("name {name:?}: {e}"))?;
            labels.push((k.to_owned(), v.to_owned()));
        }
    }
    Ok(Name {
        app: app.to_owned(),
        labels,
    })
}

/// A label key as Pyroscope allows it.
pub fn check_key(k: &str) -> Result<(), String> {
    if k.is_empty() {
        return Err("a label key is empty".into());
    }
    if k == "__name__" {
        return Err("the label key __name__ is reserved".into());
    }
    if let Some(c) = k
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.')))
    {
        return Err(format!(
            "label key {k:?}: {c:?} is not allowed (letters, digits, '_', '.')"
        ));
    }
    Ok(())
}

/// Where one label goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A resource attribute.
    Resource(&'static str, AnyValue),
    /// An attribute of every sample (the label names a thread).
    Sample(&'static str, AnyValue),
    ScopeName,
    ScopeVersion,
    ServiceName,
    /// Pyroscope's own (`__name__`, `__delta__`, ...): not kept.
    Dropped,
    /// Any other label: a resource attribute under its own name.
    Other,
}

/// The semantic-convention home of a label Pyroscope SDKs, Alloy's
/// discovery or users commonly set.
pub fn target(key: &str, value: &str) -> Target {
    let s = |v: &str| AnyValue {
        value: Some(Value::StringValue(v.to_owned())),
    };
    // Decimal ids are integers in the conventions; others stay text.
    let id = |v: &str| match v.parse::<i64>() {
        Ok(n) => AnyValue {
            value: Some(Value::IntValue(n)),
        },
        Err(_) => s(v),
    };
    match key {
        "service_name" => Target::ServiceName,
        "otel.scope.name" => Target::ScopeName,
        "otel.scope.version" => Target::ScopeVersion,
        "thread_name" => Target::Sample("thread.name", s(value)),
        "thread_id" => Target::Sample("thread.id", id(value)),
        // A per-process id drawn at start (pyroscope-go).
        "__session_id__" => Target::Resource("service.instance.id", s(value)),
        k if k.starts_with("__") => Target::Dropped,
        "hostname" | "host" | "host_name" => Target::Resource("host.name", s(value)),
        "pid" => Target::Resource("process.pid", id(value)),
        "env" | "environment" => Target::Resource("deployment.environment.name", s(value)),
        "version" | "service_version" => Target::Resource("service.version", s(value)),
        "service_namespace" => Target::Resource("service.namespace", s(value)),
        "region" => Target::Resource("cloud.region", s(value)),
        "pod" | "pod_name" => Target::Resource("k8s.pod.name", s(value)),
        "namespace" => Target::Resource("k8s.namespace.name", s(value)),
        "container" | "container_name" => Target::Resource("k8s.container.name", s(value)),
        "node" | "node_name" => Target::Resource("k8s.node.name", s(value)),
        "cluster" | "cluster_name" => Target::Resource("k8s.cluster.name", s(value)),
        _ => Target::Other,
    }
}

/// Pprof sample labels that name a thread or process, renamed to their
/// conventions (the value decimal ids become integers), and `profile_id`
/// (a span id: .NET's `SetDynamicTag`, otel-profiling-java's labels)
/// renamed `span_id` as Pyroscope's distributor renames it.
pub const SAMPLE_LABELS: [(&str, &str); 4] = [
    ("thread_name", "thread.name"),
    ("thread_id", "thread.id"),
    ("pid", "process.pid"),
    ("profile_id", "span_id"),
];

/// What a series' labels describe, sorted into OTLP's places.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Described {
    pub resource: Vec<KeyValue>,
    /// Attributes of every sample (thread labels of a series).
    pub sample: Vec<(&'static str, AnyValue)>,
    pub scope_name: String,
    pub scope_version: String,
}

/// Sorts `labels` (later ones win over earlier ones with the same key)
/// into resource, scope and sample attributes. `app` is the application
/// name: `service.name`, unless a `service_name` label names the service,
/// then `app_name` as Pyroscope keeps it. `spy` is the SDK's `spyName`.
pub fn describe(app: Option<&str>, labels: &[(String, String)], spy: Option<&Spy>) -> Described {
    let mut d = Described::default();
    let mut service = None;
    let set = |attrs: &mut Vec<KeyValue>, key: &str, value: AnyValue| match attrs
        .iter_mut()
        .find(|kv| kv.key == key)
    {
        Some(kv) => kv.value = Some(value),
        None => attrs.push(KeyValue {
            key: key.to_owned(),
            value: Some(value),
            ..Default::default()
        }),
    };
    let text = |v: &str| AnyValue {
        value: Some(Value::StringValue(v.to_owned())),
    };
    for (k, v) in labels {
        match target(k, v) {
            Target::Resource(key, value) => set(&mut d.resource, key, value),
            Target::Sample(key, value) => {
                d.sample.retain(|(k, _)| *k != key);
                d.sample.push((key, value));
            }
            Target::ScopeName => d.scope_name = v.clone(),
            Target::ScopeVersion => d.scope_version = v.clone(),
            Target::ServiceName => service = Some(v.as_str()),
            Target::Dropped => {}
            Target::Other => set(&mut d.resource, k, text(v)),
        }
    }
    match (service, app) {
        (Some(s), Some(a)) if s != a => {
            set(&mut d.resource, "service.name", text(s));
            set(&mut d.resource, "app_name", text(a));
        }
        (Some(s), _) | (None, Some(s)) => set(&mut d.resource, "service.name", text(s)),
        (None, None) => set(&mut d.resource, "service.name", text("unknown_service")),
    }
    if let Some(spy) = spy {
        set(&mut d.resource, "telemetry.sdk.name", text(&spy.name));
        if let Some(lang) = spy.language() {
            set(&mut d.resource, "telemetry.sdk.language", text(lang));
        }
        if let Some(v) = &spy.version {
            set(&mut d.resource, "telemetry.sdk.version", text(v));
        }
    }
    // Sorted, so that equal label sets describe equal resources.
    d.resource.sort_by(|a, b| a.key.cmp(&b.key));
    d
}

/// The profiler that sent a request: `spyName` on `/ingest`, the
/// `User-Agent` of pyroscope-rs based clients on Push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spy {
    pub name: String,
    pub version: Option<String>,
}

impl Spy {
    /// `spyName`; `unknown` (Pyroscope's default) or empty is none.
    pub fn from_param(name: Option<&str>) -> Option<Self> {
        let name = name?.trim();
        (!name.is_empty() && name != "unknown").then(|| Self {
            name: name.to_owned(),
            version: None,
        })
    }

    /// pyroscope-rs clients (Python 1.x, Ruby, Rust) send
    /// `pyroscope-rs/<spy>/<version> reqwest`.
    pub fn from_user_agent(ua: Option<&str>) -> Option<Self> {
        let rest = ua?.strip_prefix("pyroscope-rs/")?;
        let mut parts = rest.split([' ', '/']);
        let name = parts.next().filter(|n| !n.is_empty())?;
        let version = parts.next().filter(|v| !v.is_empty()).map(str::to_owned);
        Some(Self {
            name: name.to_owned(),
            version,
        })
    }

    /// `telemetry.sdk.language` of the spies Pyroscope knows.
    pub fn language(&self) -> Option<&'static str> {
        Some(match self.name.as_str() {
            "gospy" => "go",
            "pyspy" => "python",
            "nodespy" => "nodejs",
            "rbspy" => "ruby",
            "dotnetspy" => "dotnet",
            "javaspy" => "java",
            "phpspy" => "php",
            "rustspy" | "pyroscope-rs" => "rust",
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_as_pyroscope_parses_them() {
        let n = parse_name(
            "nodeapp{otel.scope.name=com.grafana.pyroscope/nodejs, region = eu ,env=test}",
        )
        .unwrap();
        assert_eq!(n.app, "nodeapp");
        assert_eq!(
            n.labels,
            [
                (
                    "otel.scope.name".into(),
                    "com.grafana.pyroscope/nodejs".into()
                ),
                ("region".into(), "eu".into()),
                ("env".into(), "test".into())
            ]
        );
        assert_eq!(parse_name(" pyapp.cpu ").unwrap().app, "pyapp.cpu");
        assert_eq!(parse_name("a{}").unwrap().labels, []);
        for (bad, why) in [
            ("app{env=test", "'{' is not closed"),
            ("", "empty"),
            ("{env=test}", "empty"),
            ("my app", "' ' is not allowed"),
            ("app{env}", "has no '='"),
            ("app{e-nv=x}", "'-' is not allowed"),
            ("app{__name__=x}", "reserved"),
            ("app{a=b}x", "after the closing"),
        ] {
            let e = parse_name(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn labels_go_to_their_conventions() {
        let labels: Vec<(String, String)> = [
            ("__session_id__", "77e425ea48b3919f"),
            ("env", "test"),
            ("hostname", "h1"),
            ("pod", "api-0"),
            ("otel.scope.name", "com.grafana.pyroscope/nodejs"),
            ("otel.scope.version", "0.6.4"),
            ("thread_name", "worker-1"),
            ("thread_id", "12"),
            ("custom", "x"),
            ("__delta__", "false"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let spy = Spy::from_param(Some("gospy"));
        let d = describe(Some("goapp"), &labels, spy.as_ref());
        let keys: Vec<&str> = d.resource.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "custom",
                "deployment.environment.name",
                "host.name",
                "k8s.pod.name",
                "service.instance.id",
                "service.name",
                "telemetry.sdk.language",
                "telemetry.sdk.name"
            ]
        );
        assert_eq!(d.scope_name, "com.grafana.pyroscope/nodejs");
        assert_eq!(d.scope_version, "0.6.4");
        assert_eq!(d.sample.len(), 2);
        assert_eq!(
            d.sample[1].1.value,
            Some(Value::IntValue(12)),
            "decimal thread ids are integers"
        );
        // A service_name label names the service; the app is kept.
        let d = describe(Some("app"), &[("service_name".into(), "shop".into())], None);
        let get = |k: &str| {
            d.resource
                .iter()
                .find(|kv| kv.key == k)
                .and_then(|kv| kv.value.clone())
        };
        assert_eq!(
            get("service.name"),
            Some(AnyValue {
                value: Some(Value::StringValue("shop".into()))
            })
        );
        assert!(get("app_name").is_some());
    }

    #[test]
    fn pyroscope_rs_user_agents_name_the_spy() {
        let s = Spy::from_user_agent(Some("pyroscope-rs/pyspy/1.4.0 reqwest")).unwrap();
        assert_eq!(
            (s.name.as_str(), s.version.as_deref()),
            ("pyspy", Some("1.4.0"))
        );
        assert_eq!(s.language(), Some("python"));
        assert!(Spy::from_user_agent(Some("Go-http-client/1.1")).is_none());
        assert!(Spy::from_param(Some("unknown")).is_none());
    }
}
