//! The `profile_chunk` (sample format v2) -> OTLP.
//!
//! One OTLP Profile per chunk, built with the [`OtlpBuilder`] v1 shares.

use super::chunk::ProfileChunk;
use crate::android;
use crate::de::{located, DecimalBuf};
use crate::keys as k;
use crate::otlp_builder::{
    check_item_platform, check_size, envelope_sdk, invalid_json, parse_debug_meta,
    resource_attributes, OtlpBuilder, ResourceInfo,
};
use crate::{ids, time, Converted, ItemError, Reason, ReceiveOptions, ORIGINAL_FORMAT_CHUNK};

/// Converts one `profile_chunk` item (sample format v2) without its
/// envelope; see [`chunk_to_otlp_in_envelope`].
pub fn chunk_to_otlp(
    payload: &[u8],
    item_platform: Option<&str>,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    chunk_to_otlp_in_envelope(payload, item_platform, &serde_json::Value::Null, opts)
}

/// Converts one `profile_chunk` item (sample format v2).
///
/// `item_platform` is the item header's `platform`, whose profile type must
/// be the payload's; `envelope_header` supplies the SDK when the chunk names
/// none (the Cocoa SDK sends no `client_sdk`).
pub fn chunk_to_otlp_in_envelope(
    payload: &[u8],
    item_platform: Option<&str>,
    envelope_header: &serde_json::Value,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    check_size(payload, opts, "profile chunk")?;
    let android = || android::chunk_to_otlp(payload, item_platform, envelope_header, opts);
    // Relay reads every `android` chunk as a method trace
    // (`sampled_profile`), whatever else it holds.
    let chunk = match ProfileChunk::parse(payload) {
        Ok(c) => c,
        Err(e) => {
            #[derive(serde::Deserialize)]
            struct PlatformOnly<'a> {
                #[serde(borrow)]
                platform: Option<std::borrow::Cow<'a, str>>,
            }
            return match serde_json::from_slice::<PlatformOnly>(payload) {
                Ok(PlatformOnly { platform: Some(p) }) if p == android::PLATFORM => android(),
                _ => Err(invalid_json(located::<ProfileChunk>(payload, e))),
            };
        }
    };
    if &*chunk.platform == android::PLATFORM {
        return android();
    }
    if chunk.version != 2 {
        return Err(ItemError::new(
            Reason::PlatformNotSupported,
            format!(
                "profile_chunk with sample format version {} is not supported",
                chunk.version
            ),
        ));
    }
    let platform: &str = &chunk.platform;
    check_item_platform(item_platform, platform)?;
    let chunk_id = ids::parse_uuid(&chunk.chunk_id).ok_or_else(|| {
        invalid_json(format_args!(
            "chunk_id {:?} is not a UUID",
            &*chunk.chunk_id
        ))
    })?;
    ids::parse_uuid(&chunk.profiler_id).ok_or_else(|| {
        invalid_json(format_args!(
            "profiler_id {:?} is not a UUID",
            &*chunk.profiler_id
        ))
    })?;
    let data = &chunk.profile;
    if data.samples.is_empty() {
        return Err(ItemError::new(
            Reason::NotEnoughSamples,
            "profile chunk has no samples",
        ));
    }
    let debug_meta = parse_debug_meta(chunk.debug_meta)?;

    let mut b = OtlpBuilder::new(platform, data.samples.len());
    // Relay strips pointer-authentication codes from every Cocoa chunk.
    if platform == "cocoa" {
        b.strip_pointer_authentication();
    }
    let stacks = b.add_tables(
        &debug_meta.images,
        &data.frames,
        &data.stacks,
        data.samples.iter().map(|s| s.stack_id),
    )?;

    let meta = data.thread_metadata.as_ref();
    let mut buf = DecimalBuf::default();
    for (i, s) in data.samples.iter().enumerate() {
        let ts = time::secs_to_unix_nanos(s.timestamp).ok_or_else(|| {
            ItemError::new(
                Reason::MalformedSamples,
                format!("sample {i} has timestamp {} out of range", s.timestamp),
            )
        })?;
        let set = b.thread(s.thread_id.as_str(&mut buf), meta, None);
        b.push(stacks[s.stack_id], set, ts);
    }

    b.profile_str(k::SENTRY_PROFILER_ID, Some(&chunk.profiler_id));
    b.profile_str(k::SENTRY_CHUNK_ID, Some(&chunk.chunk_id));
    b.profile_str(k::SENTRY_PLATFORM, Some(platform));
    b.profile_str(k::SENTRY_RELEASE, chunk.release.as_deref());
    b.profile_str(k::SENTRY_ENVIRONMENT, chunk.environment.as_deref());
    b.profile_str(k::SENTRY_VERSION, Some("2"));
    if let Some(meta) = meta {
        b.thread_table_attr(meta);
    }
    b.profile_str(k::SENTRY_MEASUREMENTS, chunk.measurements.map(|m| m.get()));
    if !debug_meta.images.is_empty() {
        b.profile_str(k::SENTRY_DEBUG_META, chunk.debug_meta.map(|m| m.get()));
    }

    let header_sdk = envelope_sdk(envelope_header);
    let sdk = chunk.client_sdk.as_ref().or(header_sdk.as_ref());
    let resource = resource_attributes(
        ResourceInfo {
            platform,
            release: chunk.release.as_deref(),
            environment: chunk.environment.as_deref(),
            sdk_name: sdk.and_then(|s| s.name.as_deref()),
            sdk_version: sdk.and_then(|s| s.version.as_deref()),
            extra: Vec::new(),
        },
        opts,
    );
    let original = opts
        .include_original_payload
        .then_some((ORIGINAL_FORMAT_CHUNK, payload));
    Ok(b.into_converted(chunk_id, resource, sdk, original, Vec::new()))
}
