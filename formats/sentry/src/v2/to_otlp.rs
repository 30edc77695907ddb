//! The `profile_chunk` (sample format v2) -> OTLP.
//!
//! One OTLP Profile per chunk, built with the [`OtlpBuilder`] v1 shares.

use super::chunk::{ChunkData, ChunkRoute, ChunkVersion, ProfileChunk};
use crate::android;
use crate::de::{located, DecimalBuf};
use crate::envelope::Item;
use crate::frame::DebugImage;
use crate::keys as k;
use crate::otlp_builder::{
    check_item_platform, check_size, envelope_sdk, invalid_json, parse_debug_meta,
    resource_attributes, OtlpBuilder, ResourceInfo,
};
use crate::perfetto;
use crate::{
    ids, time, Converted, ItemError, Reason, ReceiveOptions, ORIGINAL_FORMAT_CHUNK,
    ORIGINAL_FORMAT_PERFETTO,
};

/// Converts one `profile_chunk` item (sample format v2) without its
/// envelope; see [`chunk_to_otlp_in_envelope`].
pub fn chunk_to_otlp(
    payload: &[u8],
    item_platform: Option<&str>,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    chunk_to_otlp_in_envelope(payload, item_platform, &serde_json::Value::Null, opts)
}

/// Converts one `profile_chunk` item of an envelope: a Perfetto chunk by
/// its `content_type`, else a JSON one ([`chunk_to_otlp_in_envelope`]),
/// which may not carry a `meta_length`, as in Relay.
pub fn chunk_item_to_otlp(
    item: &Item<'_>,
    envelope_header: &serde_json::Value,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    let h = &item.header;
    if h.content_type.as_deref() == Some(perfetto::CONTENT_TYPE) {
        return perfetto_chunk_to_otlp(
            item.payload,
            h.meta_length,
            item.platform(),
            envelope_header,
            opts,
        );
    }
    if h.meta_length.is_some() {
        return Err(ItemError::new(
            Reason::InvalidSampledProfile,
            "a JSON profile_chunk item header has a meta_length",
        ));
    }
    chunk_to_otlp_in_envelope(item.payload, item.platform(), envelope_header, opts)
}

/// Converts one JSON `profile_chunk` item: a sample format v2 chunk, or an
/// Android method trace (`sampled_profile`).
///
/// Routed as Relay routes it: an `android` chunk of version `2` or
/// `2.android-trace` with a `sampled_profile` is a method trace, any other
/// version `2` chunk (an Android ANR profile too) is sample format v2, and
/// versions `1`, `2.android-trace` without a trace, and chunks without a
/// version are refused (`profiling_platform_not_supported`).
///
/// `item_platform` is the item header's `platform`, which must be the
/// payload's; `envelope_header` supplies the SDK when the chunk names
/// none (the Cocoa SDK sends no `client_sdk`).
pub fn chunk_to_otlp_in_envelope(
    payload: &[u8],
    item_platform: Option<&str>,
    envelope_header: &serde_json::Value,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    check_size(payload, opts, "profile chunk")?;
    // A sample format v2 chunk parses whole and is routed on what it
    // holds; only one that does not is scanned again for what Relay routes
    // on (a second scan of every chunk cost a third of the conversion).
    let parsed = ProfileChunk::parse(payload);
    let route = match &parsed {
        Ok(c) => ChunkRoute {
            platform: c.platform.clone(),
            version: ChunkVersion::from_number(c.version),
            sampled_profile: c.sampled_profile,
        },
        Err(_) => serde_json::from_slice(payload)
            .map_err(|e| invalid_json(located::<ChunkRoute>(payload, e)))?,
    };
    let android_trace = &*route.platform == android::PLATFORM
        && matches!(
            route.version,
            ChunkVersion::V2 | ChunkVersion::V2AndroidTrace
        )
        && route.sampled_profile.is_some();
    if android_trace {
        return android::chunk_to_otlp(payload, item_platform, envelope_header, opts);
    }
    if route.version != ChunkVersion::V2 {
        return Err(ItemError::new(
            Reason::PlatformNotSupported,
            format!(
                "a {} profile_chunk of version {} is not supported (sample format v2 needs version 2, an Android trace 2 or 2.android-trace and a sampled_profile)",
                &*route.platform,
                route.version.as_str()
            ),
        ));
    }
    let chunk = parsed.map_err(|e| invalid_json(located::<ProfileChunk>(payload, e)))?;
    let original = opts
        .include_original_payload
        .then_some((ORIGINAL_FORMAT_CHUNK, payload));
    v2_to_otlp(
        &chunk,
        &chunk.profile,
        Vec::new(),
        item_platform,
        envelope_header,
        opts,
        original,
    )
}

/// Converts a Perfetto `profile_chunk` item: `meta_length` bytes of chunk
/// metadata, then the binary trace (see [`crate::perfetto`]). Its item
/// header must name the platform, as Relay requires of Perfetto chunks.
pub fn perfetto_chunk_to_otlp(
    payload: &[u8],
    meta_length: Option<u64>,
    item_platform: Option<&str>,
    envelope_header: &serde_json::Value,
    opts: &ReceiveOptions,
) -> Result<Converted, ItemError> {
    check_size(payload, opts, "Perfetto profile chunk")?;
    let split = meta_length
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > 0 && n < payload.len())
        .ok_or_else(|| {
            ItemError::new(
                Reason::InvalidSampledProfile,
                format!(
                    "a Perfetto chunk needs a meta_length between 1 and the payload's {} bytes less one, got {meta_length:?}",
                    payload.len()
                ),
            )
        })?;
    let (meta, trace) = payload.split_at(split);
    type Meta<'a> = ProfileChunk<'a, Option<serde::de::IgnoredAny>>;
    let chunk: Meta =
        serde_json::from_slice(meta).map_err(|e| invalid_json(located::<Meta>(meta, e)))?;
    if item_platform.is_none() {
        return Err(ItemError::new(
            Reason::InvalidProfileType,
            "a Perfetto profile_chunk item header names no platform",
        ));
    }
    let trace = crate::perfetto::convert(trace)?;
    let original = opts
        .include_original_payload
        .then_some((ORIGINAL_FORMAT_PERFETTO, payload));
    v2_to_otlp(
        &chunk,
        &trace.data,
        trace.images,
        item_platform,
        envelope_header,
        opts,
        original,
    )
}

/// Converts a chunk's metadata and sample data; `extra_images` are the
/// debug images a Perfetto trace gives besides the metadata's `debug_meta`.
fn v2_to_otlp<'a, P>(
    chunk: &ProfileChunk<'a, P>,
    data: &ChunkData<'_>,
    extra_images: Vec<DebugImage<'a>>,
    item_platform: Option<&str>,
    envelope_header: &serde_json::Value,
    opts: &ReceiveOptions,
    original: Option<(&str, &[u8])>,
) -> Result<Converted, ItemError> {
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
    if data.samples.is_empty() {
        return Err(ItemError::new(
            Reason::NotEnoughSamples,
            "profile chunk has no samples",
        ));
    }
    let mut debug_meta = parse_debug_meta(chunk.debug_meta)?;
    debug_meta.images.extend(extra_images);

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
    let sets: Vec<u32> = data
        .samples
        .iter()
        .map(|s| b.thread(s.thread_id.as_str(&mut buf), meta, None))
        .collect();
    // The period is measured on the threads Relay keeps (more than one
    // non-idle sample): sentry-java's JVM profiler files every thread
    // without a Java frame (GC, JIT, VM threads) under thread "0" with an
    // empty stack, so that "thread" is sampled many times per tick.
    let mut non_idle = vec![0u32; sets.iter().max().map_or(0, |&m| m as usize + 1)];
    for (s, &set) in data.samples.iter().zip(&sets) {
        if !data.stacks[s.stack_id].is_empty() {
            non_idle[set as usize] += 1;
        }
    }
    if non_idle.iter().any(|&n| n > 1) {
        for (set, _) in non_idle.iter().enumerate().filter(|(_, &n)| n <= 1) {
            b.leave_out_of_period(set as u32);
        }
    }
    for (i, (s, &set)) in data.samples.iter().zip(&sets).enumerate() {
        let ts = time::secs_to_unix_nanos(s.timestamp).ok_or_else(|| {
            ItemError::new(
                Reason::MalformedSamples,
                format!("sample {i} has timestamp {} out of range", s.timestamp),
            )
        })?;
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
    Ok(b.into_converted(chunk_id, resource, sdk, original, Vec::new()))
}
