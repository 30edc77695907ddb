//! The legacy transaction profile (`profile` item, sample format v1) -> OTLP.
//!
//! Samples carry nanoseconds since the profile's `timestamp`; the profile
//! belongs to one transaction, whose trace and span become a Link on every
//! sample. Samples outside the transaction's window are dropped, as Relay does.

use super::profile::{FormatOnly, ProfileV1};
use super::transaction::{Transaction, TransactionEvent};
use crate::android;
use crate::de::{located, DecimalBuf, Version};
use crate::frame::ClientSdk;
use crate::keys as k;
use crate::otlp_builder::{
    bool_value, check_size, envelope_sdk, invalid_json, parse_debug_meta, resource_attributes,
    str_value, OtlpBuilder, ResourceInfo,
};
use crate::{ids, Converted, ItemError, Reason, ReceiveOptions, ORIGINAL_FORMAT_V1};
use profcol_model::proto::{AnyValue, KeyValue};

/// Converts one v1 `profile` item. `transaction_payload` is the envelope's
/// `transaction` item (for the span id, the SDK, and, as in Relay's
/// `parse_sample_profile`, the transaction name, `environment` and `dist`,
/// which override the profile's, and `release` where the profile has none);
/// `envelope_header` supplies the SDK when neither payload names one.
/// `item_platform` (the item header's) is not checked: Relay checks it
/// only for `profile_chunk` items.
pub fn profile_v1_to_otlp(
    payload: &[u8],
    _item_platform: Option<&str>,
    transaction_payload: Option<&[u8]>,
    envelope_header: &serde_json::Value,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    check_size(payload, opts, "profile")?;
    let Some(p) = parse(payload)? else {
        return android::legacy_to_otlp(payload, transaction_payload, envelope_header, opts);
    };
    let event_id = ids::parse_uuid(&p.event_id)
        .ok_or_else(|| invalid_json(format_args!("event_id {:?} is not a UUID", &*p.event_id)))?;
    let tx = Transaction::of(&p)?;
    // A malformed transaction event only costs the span id.
    let event: TransactionEvent = transaction_payload
        .and_then(|t| serde_json::from_slice(t).ok())
        .unwrap_or_default();
    let start = p
        .timestamp
        .or(event.start_timestamp)
        .ok_or_else(|| invalid_json("missing field `timestamp`"))?
        .0;
    if p.profile.samples.is_empty() {
        return Err(ItemError::new(
            Reason::NotEnoughSamples,
            "profile has no samples",
        ));
    }
    let debug_meta = parse_debug_meta(p.debug_meta)?;

    let mut b = OtlpBuilder::new(&p.platform, p.profile.samples.len());
    // Relay strips pointer-authentication codes from v1 Cocoa profiles of
    // arm64 and arm64e devices.
    let arch = p.device.as_ref().and_then(|d| d.architecture.as_deref());
    if &*p.platform == "cocoa" && matches!(arch, Some("arm64" | "arm64e")) {
        b.strip_pointer_authentication();
    }
    let data = &p.profile;
    let stacks = b.add_tables(
        &debug_meta.images,
        &data.frames,
        &data.stacks,
        data.samples.iter().map(|s| s.stack_id),
    )?;
    let link = b.dict.link(tx.link(&event));
    b.set_link(link);
    let outside = push_samples(&mut b, &p, &stacks, &tx, start);
    if b.accepted() == 0 {
        return Err(ItemError::new(
            Reason::NotEnoughSamples,
            "no sample falls inside the transaction",
        ));
    }

    let names = Names::of(&p, &tx, &event);
    add_profile_attributes(&mut b, &p, &tx, &names, !debug_meta.images.is_empty());
    let header_sdk = envelope_sdk(envelope_header);
    let sdk = p
        .client_sdk
        .as_ref()
        .or(event.sdk.as_ref())
        .or(header_sdk.as_ref());
    let resource = resource(&p, &names, sdk, opts);
    let original = opts
        .include_original_payload
        .then_some((ORIGINAL_FORMAT_V1, payload));
    let dropped = if outside > 0 {
        vec![(Reason::OutsideTransaction, outside)]
    } else {
        Vec::new()
    };
    Ok(b.into_converted(event_id, resource, sdk, original, dropped))
}

/// The v1 payload, or `None` for Android's legacy one; another sample
/// format version is refused by name.
fn parse(payload: &[u8]) -> Result<Option<ProfileV1<'_>>, ItemError> {
    let p: ProfileV1 = match serde_json::from_slice(payload) {
        Ok(p) => p,
        // Other formats (Android's legacy one has no `profile` at all) fail
        // the v1 parse: as Relay, tell them by their version and platform.
        Err(e) => {
            return match serde_json::from_slice::<FormatOnly>(payload) {
                Ok(FormatOnly {
                    version: None,
                    platform: Some(p),
                }) if &*p == android::PLATFORM => Ok(None),
                Ok(f) if f.version != Some(Version(1)) => Err(unsupported(f.version)),
                _ => Err(invalid_json(located::<ProfileV1>(payload, e))),
            }
        }
    };
    if p.version != Some(Version(1)) {
        return Err(unsupported(p.version));
    }
    Ok(Some(p))
}

fn unsupported(version: Option<Version>) -> ItemError {
    match version {
        Some(Version(v)) => ItemError::new(
            Reason::PlatformNotSupported,
            format!("profile with sample format version {v} is not supported"),
        ),
        None => ItemError::new(
            Reason::PlatformNotSupported,
            "profile without a sample format version is not supported (only Android's has none)",
        ),
    }
}

/// Pushes the samples inside the transaction's window; returns how many
/// fell outside.
fn push_samples(
    b: &mut OtlpBuilder,
    p: &ProfileV1,
    stacks: &[i32],
    tx: &Transaction,
    start: u64,
) -> u64 {
    let window = tx.window();
    let meta = p.profile.thread_metadata.as_ref();
    let mut buf = DecimalBuf::default();
    let mut outside = 0u64;
    for s in &p.profile.samples {
        if window
            .as_ref()
            .is_some_and(|w| !w.contains(&s.elapsed_since_start_ns))
        {
            outside += 1;
            continue;
        }
        let ts = start.saturating_add(s.elapsed_since_start_ns);
        let set = b.thread(
            s.thread_id.as_str(&mut buf),
            meta,
            s.queue_address.as_deref(),
        );
        b.push(stacks[s.stack_id], set, ts);
    }
    outside
}

/// What the profile and its transaction event both name, by Relay's
/// precedence (`parse_sample_profile`): the event's name, environment and
/// dist win; its release only fills a gap.
struct Names<'x> {
    release: Option<&'x str>,
    environment: Option<&'x str>,
    dist: Option<&'x str>,
    transaction: Option<&'x str>,
}

impl<'x> Names<'x> {
    fn of(p: &'x ProfileV1, tx: &'x Transaction, event: &'x TransactionEvent) -> Self {
        Self {
            release: p.release.as_deref().or(nonempty(event.release.as_deref())),
            environment: nonempty(event.environment.as_deref()).or(p.environment.as_deref()),
            dist: nonempty(event.dist.as_deref()).or(p.dist.as_deref()),
            transaction: nonempty(event.transaction.as_deref()).or(tx.meta.name.as_deref()),
        }
    }
}

/// The profile's attributes: what Sentry needs to take it back.
fn add_profile_attributes(
    b: &mut OtlpBuilder,
    p: &ProfileV1,
    tx: &Transaction,
    names: &Names,
    has_images: bool,
) {
    b.profile_str(k::SENTRY_EVENT_ID, Some(&p.event_id));
    b.profile_str(k::SENTRY_PLATFORM, Some(&p.platform));
    b.profile_str(k::SENTRY_RELEASE, names.release);
    b.profile_str(k::SENTRY_ENVIRONMENT, names.environment);
    b.profile_str(k::SENTRY_DIST, names.dist);
    b.profile_str(k::SENTRY_VERSION, Some("1"));
    b.profile_str(k::SENTRY_TRANSACTION_NAME, names.transaction);
    b.profile_str(k::SENTRY_TRANSACTION, Some(tx.raw));
    if let Some(meta) = &p.profile.thread_metadata {
        b.thread_table_attr(meta);
    }
    b.profile_str(
        k::SENTRY_QUEUE_METADATA,
        p.profile.queue_metadata.map(|m| m.get()),
    );
    b.profile_str(k::SENTRY_MEASUREMENTS, p.measurements.map(|m| m.get()));
    if has_images {
        b.profile_str(k::SENTRY_DEBUG_META, p.debug_meta.map(|m| m.get()));
    }
    if let Some(d) = &p.device {
        if let Some(e) = d.is_emulator {
            b.profile_attr(k::SENTRY_DEVICE_IS_EMULATOR, bool_value(e));
        }
        b.profile_str(k::SENTRY_DEVICE_LOCALE, d.locale.as_deref());
    }
}

/// Resource attributes, with the device, OS and runtime v1 describes.
fn resource(
    p: &ProfileV1,
    names: &Names,
    sdk: Option<&ClientSdk>,
    opts: &ReceiveOptions,
) -> Vec<KeyValue> {
    let mut extra: Vec<(&'static str, AnyValue)> = Vec::new();
    let mut put = |key: &'static str, v: Option<&str>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            extra.push((key, str_value(v)));
        }
    };
    if let Some(d) = &p.device {
        put(k::HOST_ARCH, d.architecture.as_deref().map(k::host_arch));
        put(k::DEVICE_MODEL, d.model.as_deref());
        put(k::DEVICE_MANUFACTURER, d.manufacturer.as_deref());
    }
    if let Some(os) = &p.os {
        put(k::OS_NAME, os.name.as_deref());
        put(k::OS_VERSION, os.version.as_deref());
        put(k::OS_BUILD_ID, os.build_number.as_deref());
    }
    if let Some(r) = &p.runtime {
        put(k::RUNTIME_NAME, r.name.as_deref());
        put(k::RUNTIME_VERSION, r.version.as_deref());
    }
    resource_attributes(
        ResourceInfo {
            platform: &p.platform,
            release: names.release,
            environment: names.environment,
            sdk_name: sdk.and_then(|s| s.name.as_deref()),
            sdk_version: sdk.and_then(|s| s.version.as_deref()),
            extra,
        },
        opts,
    )
}

fn nonempty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}
