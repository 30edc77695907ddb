//! Android `profile_chunk`s and legacy Android `profile`s -> OTLP
//! (Relay: `relay-profiling/src/android/{chunk,legacy}.rs`).
//!
//! Both carry the method trace in `sampled_profile`; its spans (see
//! [`super::trace`]) become points with wall nanoseconds. A legacy profile
//! belongs to a transaction as a v1 profile does: the trace and span become
//! a Link on every point.

use std::collections::{BTreeMap, HashMap};

use android_trace_log::AndroidTraceLog;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::trace;
use crate::de::{located, CowStr};
use crate::frame::{ClientSdk, ThreadMeta};
use crate::keys as k;
use crate::otlp_builder::{
    bool_value, check_item_platform, check_size, envelope_sdk, invalid_json, resource_attributes,
    str_value, OtlpBuilder, ResourceInfo,
};
use crate::v1::transaction::{self, Transaction, TransactionEvent};
use crate::{ids, Converted, ItemError, Reason, ReceiveOptions};
use profcol_model::proto::{AnyValue, Line, Location};

/// The platform of both Android payloads.
pub const PLATFORM: &str = "android";

/// `original_payload_format` of a converted Android chunk.
pub const ORIGINAL_FORMAT_CHUNK: &str = "sentry_android_profile_chunk";
/// `original_payload_format` of a converted legacy Android profile.
pub const ORIGINAL_FORMAT_LEGACY: &str = "sentry_android_profile";

/// Relay's limit on a legacy profile's trace (`MAX_PROFILE_DURATION`).
const MAX_LEGACY_DURATION_NS: u128 = 30_000_000_000;
/// Relay's limit on a chunk's trace (`MAX_PROFILE_CHUNK_DURATION`).
const MAX_CHUNK_DURATION_NS: u128 = 66_000_000_000;

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow)]
    chunk_id: CowStr<'a>,
    #[serde(borrow)]
    profiler_id: CowStr<'a>,
    #[serde(borrow, default)]
    client_sdk: Option<ClientSdk<'a>>,
    #[serde(borrow, default)]
    release: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    environment: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    build_id: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    debug_meta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    measurements: Option<&'a RawValue>,
    #[serde(borrow, default)]
    js_profile: Option<&'a RawValue>,
    #[serde(borrow, default)]
    sampled_profile: Option<CowStr<'a>>,
}

#[derive(Deserialize)]
struct Legacy<'a> {
    #[serde(alias = "event_id", borrow)]
    profile_id: CowStr<'a>,
    #[serde(borrow, default)]
    client_sdk: Option<ClientSdk<'a>>,
    #[serde(borrow, default)]
    release: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    environment: Option<CowStr<'a>>,
    /// The release, as sentry-java names it in these profiles.
    #[serde(borrow, default)]
    version_name: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    dist: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    build_id: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    debug_meta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    js_profile: Option<&'a RawValue>,
    #[serde(borrow, default)]
    sampled_profile: Option<CowStr<'a>>,
    #[serde(default, deserialize_with = "crate::de::opt_bool_lenient")]
    device_is_emulator: Option<bool>,
    #[serde(borrow, default)]
    device_locale: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    device_manufacturer: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    device_model: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    device_os_name: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    device_os_version: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    device_os_build_number: Option<CowStr<'a>>,
    // The transaction: newer SDKs send a `transactions` list, older ones
    // these top-level fields.
    #[serde(borrow, default)]
    transactions: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    transaction_name: Option<CowStr<'a>>,
    #[serde(borrow, default)]
    trace_id: Option<CowStr<'a>>,
}

fn nonempty<'s>(s: Option<&'s CowStr<'_>>) -> Option<&'s str> {
    s.map(|s| &**s).filter(|s| !s.is_empty())
}

/// Parses the trace and applies Relay's checks on it.
fn read_trace(sampled: Option<&CowStr>, max_ns: u128) -> Result<AndroidTraceLog, ItemError> {
    // As Relay: no trace at all is a trace without events.
    let sampled = nonempty(sampled).ok_or_else(|| {
        ItemError::new(
            Reason::NotEnoughSamples,
            "Android profile has no sampled_profile",
        )
    })?;
    let log = trace::decode(sampled)?;
    if log.events.is_empty() {
        return Err(ItemError::new(
            Reason::NotEnoughSamples,
            "Android trace has no events",
        ));
    }
    let ns = log.elapsed_time.as_nanos();
    if ns == 0 {
        return Err(ItemError::new(
            Reason::NotEnoughSamples,
            "Android trace has an elapsed time of zero",
        ));
    }
    if ns > max_ns {
        return Err(ItemError::new(
            Reason::DurationTooLong,
            format!(
                "Android trace lasts {} ms, over Relay's {} ms",
                ns / 1_000_000,
                max_ns / 1_000_000
            ),
        ));
    }
    Ok(log)
}

/// Adds the trace's spans to `b`.
fn add_trace(b: &mut OtlpBuilder, log: &AndroidTraceLog) -> Result<(), ItemError> {
    let spans = trace::spans(log);
    if spans.spans.is_empty() {
        return Err(ItemError::new(
            Reason::NotEnoughSamples,
            "Android trace holds no time spent in a method",
        ));
    }
    let frame_type = b.attr(k::FRAME_TYPE, str_value("jvm"));
    let methods: HashMap<u32, &android_trace_log::Method> =
        log.methods.iter().map(|m| (m.id, m)).collect();
    let mut locations: HashMap<u32, i32> = HashMap::with_capacity(methods.len());
    let mut location = |b: &mut OtlpBuilder, id: u32| -> i32 {
        *locations.entry(id).or_insert_with(|| {
            let (name, system, file, line) = match methods.get(&id) {
                Some(m) => (
                    format!("{}.{}", m.class_name, m.name),
                    format!("{}.{}{}", m.class_name, m.name, m.signature),
                    m.source_file.as_str(),
                    m.source_line.unwrap_or(0),
                ),
                // Relay does not check event method ids against the table.
                None => (format!("unknown method {id:#x}"), String::new(), "", 0),
            };
            let function = b.dict.function_named(&name, &system, file, 0);
            b.dict.location(Location {
                mapping_index: 0,
                address: 0,
                lines: vec![Line {
                    function_index: function,
                    line: i64::from(line),
                    column: 0,
                }],
                attribute_indices: vec![frame_type],
            })
        })
    };
    let mut locs = Vec::new();
    let stacks: Vec<i32> = spans
        .stacks
        .iter()
        .map(|s| {
            locs.clear();
            // Trace stacks are outermost first, OTLP's leaf first.
            for &m in s.iter().rev() {
                locs.push(location(b, m));
            }
            b.dict.stack(&locs)
        })
        .collect();

    let meta: BTreeMap<CowStr, ThreadMeta> = log
        .threads
        .iter()
        .map(|t| {
            (
                CowStr(t.id.to_string().into()),
                ThreadMeta {
                    name: Some(CowStr(t.name.as_str().into())),
                    priority: None,
                },
            )
        })
        .collect();
    let start = u64::try_from(log.start_time.timestamp_nanos_opt().unwrap_or(0)).unwrap_or(0);
    let mut sets: HashMap<u16, u32> = HashMap::new();
    for s in &spans.spans {
        let set = *sets
            .entry(s.thread)
            .or_insert_with(|| b.thread(&s.thread.to_string(), Some(&meta), None));
        b.push_span(
            stacks[s.stack as usize],
            set,
            start.saturating_add(s.start_ns),
            s.duration_ns,
        );
    }
    b.thread_table_attr(&meta);
    Ok(())
}

/// Converts an Android `profile_chunk` item.
pub fn chunk_to_otlp(
    payload: &[u8],
    item_platform: Option<&str>,
    envelope_header: &serde_json::Value,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    check_size(payload, opts, "Android profile chunk")?;
    check_item_platform(item_platform, PLATFORM)?;
    let c: Chunk =
        serde_json::from_slice(payload).map_err(|e| invalid_json(located::<Chunk>(payload, e)))?;
    let chunk_id = ids::parse_uuid(&c.chunk_id)
        .ok_or_else(|| invalid_json(format_args!("chunk_id {:?} is not a UUID", &*c.chunk_id)))?;
    ids::parse_uuid(&c.profiler_id).ok_or_else(|| {
        invalid_json(format_args!(
            "profiler_id {:?} is not a UUID",
            &*c.profiler_id
        ))
    })?;
    let log = read_trace(c.sampled_profile.as_ref(), MAX_CHUNK_DURATION_NS)?;

    let mut b = OtlpBuilder::new(PLATFORM, log.events.len());
    add_trace(&mut b, &log)?;
    b.profile_str(k::SENTRY_PROFILER_ID, Some(&c.profiler_id));
    b.profile_str(k::SENTRY_CHUNK_ID, Some(&c.chunk_id));
    let release = nonempty(c.release.as_ref());
    let environment = nonempty(c.environment.as_ref());
    common_attrs(&mut b, release, environment, c.build_id.as_ref());
    b.profile_str(k::SENTRY_MEASUREMENTS, c.measurements.map(|m| m.get()));
    b.profile_str(k::SENTRY_DEBUG_META, c.debug_meta.map(|m| m.get()));
    b.profile_str(k::SENTRY_JS_PROFILE, c.js_profile.map(|m| m.get()));

    let header_sdk = envelope_sdk(envelope_header);
    let sdk = c.client_sdk.as_ref().or(header_sdk.as_ref());
    let resource = resource(release, environment, sdk, Vec::new(), opts);
    let original = opts
        .include_original_payload
        .then_some((ORIGINAL_FORMAT_CHUNK, payload));
    Ok(b.into_converted(chunk_id, resource, sdk, original, Vec::new()))
}

/// Converts a legacy Android `profile` item; `transaction_payload` is the
/// envelope's `transaction` item, whose name, release, environment and
/// dist win over the profile's, as in Relay's `parse_android_profile`.
pub fn legacy_to_otlp(
    payload: &[u8],
    transaction_payload: Option<&[u8]>,
    envelope_header: &serde_json::Value,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    check_size(payload, opts, "Android profile")?;
    let p: Legacy =
        serde_json::from_slice(payload).map_err(|e| invalid_json(located::<Legacy>(payload, e)))?;
    let event_id = ids::parse_uuid(&p.profile_id).ok_or_else(|| {
        invalid_json(format_args!(
            "profile_id {:?} is not a UUID",
            &*p.profile_id
        ))
    })?;
    let (tx_name, trace_id, tx_raw) = transaction(&p)?;
    let log = read_trace(p.sampled_profile.as_ref(), MAX_LEGACY_DURATION_NS)?;
    let event: TransactionEvent = transaction_payload
        .and_then(|t| serde_json::from_slice(t).ok())
        .unwrap_or_default();

    let mut b = OtlpBuilder::new(PLATFORM, log.events.len());
    if let Some(t) = trace_id {
        let link = b.dict.link(transaction::link(t, &event));
        b.set_link(link);
    }
    add_trace(&mut b, &log)?;

    let pick = |event: Option<&CowStr>, own: Option<&CowStr>| {
        nonempty(event).or(nonempty(own)).map(str::to_owned)
    };
    let own_release = p.release.as_ref().or(p.version_name.as_ref());
    let release = pick(event.release.as_ref(), own_release);
    let environment = pick(event.environment.as_ref(), p.environment.as_ref());
    let dist = pick(event.dist.as_ref(), p.dist.as_ref());
    let tx_name = nonempty(event.transaction.as_ref()).or(tx_name.as_deref());
    b.profile_str(k::SENTRY_EVENT_ID, Some(&p.profile_id));
    common_attrs(
        &mut b,
        release.as_deref(),
        environment.as_deref(),
        p.build_id.as_ref(),
    );
    b.profile_str(k::SENTRY_DIST, dist.as_deref());
    b.profile_str(k::SENTRY_TRANSACTION_NAME, tx_name);
    b.profile_str(k::SENTRY_TRANSACTION, tx_raw);
    b.profile_str(k::SENTRY_DEBUG_META, p.debug_meta.map(|m| m.get()));
    b.profile_str(k::SENTRY_JS_PROFILE, p.js_profile.map(|m| m.get()));
    if let Some(e) = p.device_is_emulator {
        b.profile_attr(k::SENTRY_DEVICE_IS_EMULATOR, bool_value(e));
    }
    b.profile_str(k::SENTRY_DEVICE_LOCALE, nonempty(p.device_locale.as_ref()));

    let header_sdk = envelope_sdk(envelope_header);
    let sdk = p
        .client_sdk
        .as_ref()
        .or(event.sdk.as_ref())
        .or(header_sdk.as_ref());
    let mut extra = Vec::new();
    for (key, v) in [
        (k::DEVICE_MODEL, &p.device_model),
        (k::DEVICE_MANUFACTURER, &p.device_manufacturer),
        (k::OS_NAME, &p.device_os_name),
        (k::OS_VERSION, &p.device_os_version),
        (k::OS_BUILD_ID, &p.device_os_build_number),
    ] {
        if let Some(v) = nonempty(v.as_ref()) {
            extra.push((key, str_value(v)));
        }
    }
    let resource = resource(release.as_deref(), environment.as_deref(), sdk, extra, opts);
    let original = opts
        .include_original_payload
        .then_some((ORIGINAL_FORMAT_LEGACY, payload));
    Ok(b.into_converted(event_id, resource, sdk, original, Vec::new()))
}

/// The profile's transaction as Relay reads it: the first of
/// `transactions`, else the top-level `transaction_*` fields. Returns its
/// name, trace id and, from the list, its JSON.
#[allow(clippy::type_complexity)]
fn transaction<'p>(
    p: &'p Legacy,
) -> Result<(Option<String>, Option<[u8; 16]>, Option<&'p str>), ItemError> {
    if let Some(raw) = p.transactions.as_ref().and_then(|t| t.first()) {
        let tx = Transaction::parse(raw.get())?;
        let name = tx.meta.name.map(|n| n.0.into_owned());
        return Ok((name, Some(tx.trace_id), Some(tx.raw)));
    }
    match nonempty(p.transaction_name.as_ref()) {
        Some(name) => {
            // Older SDKs send no trace id, or the nil one.
            let trace_id = nonempty(p.trace_id.as_ref())
                .and_then(ids::parse_uuid)
                .filter(|t| *t != [0; 16]);
            Ok((Some(name.to_owned()), trace_id, None))
        }
        None => Err(ItemError::new(
            Reason::NoTransaction,
            "Android profile names no transaction",
        )),
    }
}

fn common_attrs(
    b: &mut OtlpBuilder,
    release: Option<&str>,
    environment: Option<&str>,
    build_id: Option<&CowStr>,
) {
    b.profile_str(k::SENTRY_PLATFORM, Some(PLATFORM));
    b.profile_str(k::SENTRY_RELEASE, release);
    b.profile_str(k::SENTRY_ENVIRONMENT, environment);
    b.profile_str(k::SENTRY_BUILD_ID, nonempty(build_id));
}

fn resource(
    release: Option<&str>,
    environment: Option<&str>,
    sdk: Option<&ClientSdk>,
    extra: Vec<(&'static str, AnyValue)>,
    opts: &ReceiveOptions,
) -> Vec<profcol_model::proto::KeyValue> {
    resource_attributes(
        ResourceInfo {
            platform: PLATFORM,
            release,
            environment,
            sdk_name: sdk.and_then(|s| s.name.as_deref()),
            sdk_version: sdk.and_then(|s| s.version.as_deref()),
            extra,
        },
        opts,
    )
}
