//! What every chunk of a Profile shares: profiler session, platform,
//! release, environment, SDK, `debug_meta` and measurements as received.

use super::dict::{android_trace, attr_text, nonempty, resource_text};
use super::frames::Frames;
use super::images::received_debug_meta;
use super::ExportOptions;
use crate::ids;
use crate::keys as k;
use crate::v2::outgoing::{ClientSdk, DebugMeta};
use profcol_model::dictionary::Lookup;
use profcol_model::proto::{KeyValue, Profile};

/// Per-chunk metadata shared by a Profile's chunks.
pub(super) struct Meta {
    pub profiler_id: String,
    pub profile_id: Option<[u8; 16]>,
    pub platform: String,
    pub release: Option<String>,
    pub environment: Option<String>,
    pub client_sdk: ClientSdk,
    /// `debug_meta` as received; `None`: built per chunk from its mappings.
    pub received_debug_meta: Option<Option<DebugMeta>>,
    pub measurements: Option<Box<serde_json::value::RawValue>>,
}

/// Resource attributes that tell one process of a service from another,
/// for its profiler session.
const PROCESS_IDENTITY: [&str; 6] = [
    k::SERVICE_INSTANCE_ID,
    k::HOST_NAME,
    k::PROCESS_PID,
    k::CONTAINER_ID,
    k::K8S_POD_UID,
    k::HOST_ID,
];

impl Meta {
    /// What every chunk of `profile` shares.
    pub(super) fn new(
        d: Lookup<'_>,
        resource: &[KeyValue],
        profile: &Profile,
        opts: &ExportOptions,
        frames: &Frames,
    ) -> Self {
        let pa = &profile.attribute_indices[..];
        let profiler_id = attr_text(d, pa, k::SENTRY_PROFILER_ID)
            .as_deref()
            .and_then(ids::parse_uuid)
            .or_else(|| {
                // A v1 (or legacy Android) profile belongs to its
                // transaction alone: its own session, not one shared with
                // the service's other such profiles (concurrent
                // transactions, other workers), whose samples would land on
                // the same thread timeline.
                let v1 = attr_text(d, pa, k::SENTRY_VERSION).as_deref() == Some("1")
                    || android_trace(d, pa);
                let event = attr_text(d, pa, k::SENTRY_EVENT_ID).filter(|_| v1)?;
                Some(ids::stable_uuid(&[b"sentry v1 profile", event.as_bytes()]))
            })
            .unwrap_or_else(|| {
                let part = |key| resource_text(resource, key).unwrap_or_default();
                let svc = part(k::SERVICE_NAME);
                // What tells one process apart from the service's others
                // (the eBPF profiler often names only its container).
                let instance = PROCESS_IDENTITY.map(part);
                if instance.iter().all(|p| p.is_empty()) {
                    // Nothing tells replicas of the service apart: this
                    // exporter's own session, not one shared with them.
                    return ids::stable_uuid(&[svc.as_bytes(), &opts.instance_id]);
                }
                let mut parts = vec![svc.as_bytes()];
                parts.extend(instance.iter().map(|p| p.as_bytes()));
                ids::stable_uuid(&parts)
            });
        let profile_id = <[u8; 16]>::try_from(profile.profile_id.as_slice())
            .ok()
            .filter(|id| *id != [0; 16]);
        let platform = nonempty(attr_text(d, pa, k::SENTRY_PLATFORM))
            .or_else(|| {
                resource_text(resource, k::SDK_LANGUAGE)
                    .and_then(|l| k::platform_from_language(&l))
                    .map(str::to_owned)
            })
            .or_else(|| frames.frame_runtime().map(str::to_owned))
            .or_else(|| opts.default_platform.clone())
            .unwrap_or_else(|| "native".to_owned());
        // A release is `package@version` in Sentry; an OTLP producer's
        // version alone would land beside every other service's "1.2.0".
        let release = nonempty(attr_text(d, pa, k::SENTRY_RELEASE)).or_else(|| {
            let version = nonempty(resource_text(resource, k::SERVICE_VERSION))?;
            match nonempty(resource_text(resource, k::SERVICE_NAME)) {
                Some(name) if !version.contains('@') => Some(format!("{name}@{version}")),
                _ => Some(version),
            }
        });
        let environment = nonempty(attr_text(d, pa, k::SENTRY_ENVIRONMENT))
            .or_else(|| nonempty(resource_text(resource, k::DEPLOYMENT_ENVIRONMENT)))
            .or_else(|| nonempty(resource_text(resource, k::DEPLOYMENT_ENVIRONMENT_OLD)));
        // The SDK that made the profile (`telemetry.sdk.*`), as Sentry
        // shows it; a producer that names none is sent as profcol's.
        let sdk_version = nonempty(resource_text(resource, k::SDK_VERSION));
        let client_sdk = match (nonempty(resource_text(resource, k::SDK_NAME)), sdk_version) {
            (Some(name), Some(version)) => ClientSdk { name, version },
            (Some(name), None) if name.starts_with("sentry.") => ClientSdk {
                name,
                version: String::new(),
            },
            _ => ClientSdk {
                name: "profcol".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
            },
        };
        // v1 measurements count nanoseconds since the profile start, a
        // shape Relay's chunk parser refuses: only v2 ones go back.
        let from_v2 = attr_text(d, pa, k::SENTRY_VERSION).as_deref() == Some("2");
        let measurements = attr_text(d, pa, k::SENTRY_MEASUREMENTS)
            .filter(|_| from_v2)
            .and_then(|m| serde_json::value::RawValue::from_string(m.into_owned()).ok());
        Meta {
            profiler_id: ids::format_uuid(&profiler_id),
            profile_id,
            platform,
            release,
            environment,
            client_sdk,
            received_debug_meta: received_debug_meta(d, pa),
            measurements,
        }
    }
}
