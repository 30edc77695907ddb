//! Sentry profile -> OTLP: the builder and item checks v1 and v2 share.
//!
//! One OTLP Profile per Sentry profile, with its own dictionary. Each Sentry
//! sample becomes one entry of `timestamps_unix_nano`; samples with the same
//! stack, thread (and link) share one OTLP Sample, as the proto asks.

use std::collections::BTreeMap;

use hashbrown::HashMap;

use super::de::CowStr;
use super::frame::{ClientSdk, DebugImage, DebugMeta, Frame, ThreadMeta};
use super::keys::{self as k, frame_type, sdk_language};
use super::platform::ProfileType;
use super::{Converted, ItemError, Reason, ReceiveOptions};
use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue, KeyValueList, Line, Location,
    Mapping, Profile, ProfilesData, Resource, ResourceProfiles, Sample, ScopeProfiles, ValueType,
};

/// Sampling period assumed when the samples do not show one: Sentry SDKs
/// sample at 101 Hz.
pub const DEFAULT_PERIOD_NS: u64 = 1_000_000_000 / 101;

/// The address bits left after stripping arm64 pointer-authentication codes
/// (Relay's `strip_pointer_authentication_code`, after PLCrashReporter): the
/// upper bits of a Cocoa return address may carry a signature.
pub const PAC_STRIP_MASK: u64 = 0x0000_000F_FFFF_FFFF;

pub(crate) fn str_value(s: &str) -> AnyValue {
    AnyValue {
        value: Some(Value::StringValue(s.to_owned())),
    }
}

pub(crate) fn int_value(i: i64) -> AnyValue {
    AnyValue {
        value: Some(Value::IntValue(i)),
    }
}

pub(crate) fn bool_value(b: bool) -> AnyValue {
    AnyValue {
        value: Some(Value::BoolValue(b)),
    }
}

/// `thread.id` value: an integer when Sentry's id is a canonical decimal
/// (so it formats back to the same string), the string otherwise.
pub(crate) fn thread_id_value(id: &str) -> AnyValue {
    let canonical = !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && (id == "0" || !id.starts_with('0'));
    match id.parse::<i64>() {
        Ok(n) if canonical => int_value(n),
        _ => str_value(id),
    }
}

fn nonempty<'s>(s: Option<&'s CowStr<'_>>) -> Option<&'s str> {
    s.map(|s| &**s).filter(|s| !s.is_empty())
}

/// Builds one OTLP profile and its dictionary from Sentry tables.
pub(crate) struct OtlpBuilder {
    pub dict: DictionaryBuilder,
    platform: String,
    /// Applied to every `instruction_addr` (see [`PAC_STRIP_MASK`]).
    addr_mask: u64,
    /// (start, limit, mapping index), sorted by start.
    ranges: Vec<(u64, u64, i32)>,
    /// Sample attribute sets (thread, queue) by their key text.
    sets: HashMap<String, u32>,
    set_attrs: Vec<Vec<i32>>,
    set_last_ts: Vec<u64>,
    /// Threads whose intervals [`Self::period`] leaves out.
    set_unmeasured: Vec<bool>,
    key_buf: String,
    /// Per attribute set: OTLP sample index by stack index (`u32::MAX`: none yet).
    rows: Vec<Vec<u32>>,
    samples: Vec<Sample>,
    sample_set: Vec<u32>,
    /// (OTLP sample, timestamp) in arrival order; gathered into the samples
    /// at the end, so the hot loop only appends.
    points: Vec<(u32, u64)>,
    /// Wall nanoseconds per point, for spans ([`Self::push_span`]); empty
    /// for samples, which count one each.
    values: Vec<i64>,
    /// End of the latest span.
    max_end: u64,
    link: i32,
    deltas: Vec<u64>,
    unsorted: bool,
    min_ts: u64,
    max_ts: u64,
    pub profile_attrs: Vec<i32>,
}

impl OtlpBuilder {
    pub(crate) fn new(platform: &str, expected_samples: usize) -> Self {
        Self {
            dict: DictionaryBuilder::new(),
            platform: platform.to_owned(),
            addr_mask: u64::MAX,
            ranges: Vec::new(),
            sets: HashMap::new(),
            set_attrs: Vec::new(),
            set_last_ts: Vec::new(),
            set_unmeasured: Vec::new(),
            key_buf: String::new(),
            rows: Vec::new(),
            samples: Vec::new(),
            sample_set: Vec::new(),
            points: Vec::with_capacity(expected_samples),
            values: Vec::new(),
            max_end: 0,
            link: 0,
            deltas: Vec::with_capacity(expected_samples),
            unsorted: false,
            min_ts: u64::MAX,
            max_ts: 0,
            profile_attrs: Vec::new(),
        }
    }

    /// Strips pointer-authentication bits from every following frame's
    /// address, as Relay does for Cocoa, so that signed return addresses
    /// fall into their `debug_meta` image.
    pub(crate) fn strip_pointer_authentication(&mut self) {
        self.addr_mask = PAC_STRIP_MASK;
    }

    pub(crate) fn attr(&mut self, key: &str, value: AnyValue) -> i32 {
        self.dict.attribute_kv(key, value, "")
    }

    pub(crate) fn profile_attr(&mut self, key: &str, value: AnyValue) {
        let i = self.attr(key, value);
        self.profile_attrs.push(i);
    }

    pub(crate) fn profile_str(&mut self, key: &str, value: Option<&str>) {
        if let Some(v) = value {
            self.profile_attr(key, str_value(v));
        }
    }

    /// One Mapping per debug image with an address range.
    pub(crate) fn add_images(&mut self, images: &[DebugImage]) {
        for img in images {
            let mut attrs = Vec::new();
            let mut put = |b: &mut Self, key: &str, v: Option<&CowStr>| {
                if let Some(v) = nonempty(v) {
                    attrs.push(b.attr(key, str_value(v)));
                }
            };
            put(self, k::SENTRY_IMAGE_TYPE, img.image_type.as_ref());
            put(
                self,
                k::SENTRY_DEBUG_ID,
                img.debug_id.as_ref().or(img.uuid.as_ref()),
            );
            put(self, k::SENTRY_CODE_ID, img.code_id.as_ref());
            put(self, k::SENTRY_DEBUG_FILE, img.debug_file.as_ref());
            put(self, k::SENTRY_ARCH, img.arch.as_ref());
            if matches!(img.image_type.as_deref(), Some("elf" | "symbolic")) {
                put(self, k::BUILD_ID_GNU, img.code_id.as_ref());
            }
            if let Some(vm) = img.image_vmaddr {
                attrs.push(self.attr(k::SENTRY_IMAGE_VMADDR, int_value(vm as i64)));
            }
            let start = img.image_addr.unwrap_or(0);
            let limit = start.saturating_add(img.image_size.unwrap_or(0));
            let filename = self
                .dict
                .string(nonempty(img.code_file.as_ref()).unwrap_or(""));
            let idx = self.dict.mapping(Mapping {
                memory_start: start,
                memory_limit: limit,
                file_offset: 0,
                filename_strindex: filename,
                attribute_indices: attrs,
            });
            if limit > start {
                self.ranges.push((start, limit, idx));
            }
        }
        self.ranges.sort_unstable();
    }

    fn mapping_for(&self, addr: u64) -> i32 {
        let i = self.ranges.partition_point(|r| r.0 <= addr);
        match i.checked_sub(1).map(|i| self.ranges[i]) {
            Some((_, limit, idx)) if addr < limit => idx,
            _ => 0,
        }
    }

    /// Interns every frame as a Location; returns their indices.
    pub(crate) fn add_frames(&mut self, frames: &[Frame]) -> Vec<i32> {
        let mut out = Vec::with_capacity(frames.len());
        for f in frames {
            let abs = nonempty(f.abs_path.as_ref());
            let file = nonempty(f.filename.as_ref());
            let fn_file = abs.or(file);
            let name = nonempty(f.function.as_ref()).unwrap_or("");
            let raw = nonempty(f.raw_function.as_ref());
            let symbol = nonempty(f.symbol.as_ref());
            let system = raw.or(symbol).unwrap_or("");
            let frame_platform = nonempty(f.platform.as_ref());
            let frame_type = frame_type(frame_platform.unwrap_or(&self.platform));
            let qualified = jvm_method_name(frame_type, name, fn_file);
            let function = self.dict.function_named(
                qualified.as_deref().unwrap_or(name),
                system,
                fn_file.unwrap_or(""),
                0,
            );

            let mut attrs = Vec::new();
            if let Some(ft) = frame_type {
                attrs.push(self.attr(k::FRAME_TYPE, str_value(ft)));
            }
            if let Some(p) = frame_platform.filter(|p| *p != self.platform) {
                attrs.push(self.attr(k::SENTRY_PLATFORM, str_value(p)));
            }
            if let Some(in_app) = f.in_app {
                attrs.push(self.attr(k::SENTRY_IN_APP, bool_value(in_app)));
            }
            if let Some(m) = nonempty(f.module.as_ref()) {
                attrs.push(self.attr(k::SENTRY_MODULE, str_value(m)));
            }
            if let Some(p) = nonempty(f.package.as_ref()) {
                attrs.push(self.attr(k::SENTRY_PACKAGE, str_value(p)));
            }
            if let Some(sym) = symbol.filter(|s| raw.is_some_and(|r| r != *s)) {
                attrs.push(self.attr(k::SENTRY_SYMBOL, str_value(sym)));
            }
            if file != fn_file {
                attrs.push(self.attr(k::SENTRY_FILENAME, str_value(file.unwrap_or(""))));
            }
            if abs != fn_file {
                attrs.push(self.attr(k::SENTRY_ABS_PATH, str_value(abs.unwrap_or(""))));
            }

            let line = f.lineno.map_or(0, |l| l as i64);
            let column = f.colno.map_or(0, |c| c as i64);
            let lines = if function != 0 || line != 0 || column != 0 {
                vec![Line {
                    function_index: function,
                    line,
                    column,
                }]
            } else {
                Vec::new()
            };
            let address = f.instruction_addr.unwrap_or(0) & self.addr_mask;
            let mapping_index = if f.instruction_addr.is_some() {
                self.mapping_for(address)
            } else {
                0
            };
            out.push(self.dict.location(Location {
                mapping_index,
                address,
                lines,
                attribute_indices: attrs,
            }));
        }
        out
    }

    /// Interns a profile's debug images, frames and stacks (v1 and v2 share
    /// the shape) and returns the OTLP stack of each Sentry stack. As
    /// Relay, refuses a sample naming an unknown stack, then a stack naming
    /// an unknown frame.
    pub(crate) fn add_tables(
        &mut self,
        images: &[DebugImage],
        frames: &[Frame],
        stacks: &[Vec<usize>],
        sample_stacks: impl Iterator<Item = usize>,
    ) -> Result<Vec<i32>, ItemError> {
        self.add_images(images);
        let locations = self.add_frames(frames);
        let otlp_stacks = self.add_stacks(stacks, &locations);
        // Relay reports unknown stacks before unknown frames.
        if let Some((i, s)) = sample_stacks.enumerate().find(|&(_, s)| s >= stacks.len()) {
            return Err(ItemError::new(
                Reason::MalformedSamples,
                format!("sample {i} references stack {s} of {}", stacks.len()),
            ));
        }
        otlp_stacks.map_err(|i| {
            ItemError::new(
                Reason::MalformedStacks,
                format!(
                    "stack {i} references a frame beyond the {} frames",
                    frames.len()
                ),
            )
        })
    }

    /// Interns every stack; `Err(i)` names the first stack holding an
    /// unknown frame index.
    pub(crate) fn add_stacks(
        &mut self,
        stacks: &[Vec<usize>],
        locations: &[i32],
    ) -> Result<Vec<i32>, usize> {
        let mut out = Vec::with_capacity(stacks.len());
        let mut locs = Vec::new();
        for (i, stack) in stacks.iter().enumerate() {
            locs.clear();
            for &f in stack {
                locs.push(*locations.get(f).ok_or(i)?);
            }
            out.push(self.dict.stack(&locs));
        }
        Ok(out)
    }

    /// Index of the sample attribute set for a thread (and Cocoa queue).
    pub(crate) fn thread(
        &mut self,
        id: &str,
        meta: Option<&BTreeMap<CowStr, ThreadMeta>>,
        queue: Option<&str>,
    ) -> u32 {
        let key = match queue {
            None => id,
            Some(q) => {
                self.key_buf.clear();
                self.key_buf.push_str(id);
                self.key_buf.push('\0');
                self.key_buf.push_str(q);
                &self.key_buf
            }
        };
        if let Some(&i) = self.sets.get(key) {
            return i;
        }
        let key = key.to_owned();
        let mut attrs = vec![self.attr(k::THREAD_ID, thread_id_value(id))];
        if let Some(name) = meta
            .and_then(|m| m.get(id))
            .and_then(|t| nonempty(t.name.as_ref()))
        {
            attrs.push(self.attr(k::THREAD_NAME, str_value(name)));
        }
        if let Some(q) = queue {
            attrs.push(self.attr(k::SENTRY_QUEUE_ADDRESS, str_value(q)));
        }
        let i = self.set_attrs.len() as u32;
        self.set_attrs.push(attrs);
        self.set_last_ts.push(0);
        self.set_unmeasured.push(false);
        self.rows.push(Vec::new());
        self.sets.insert(key, i);
        i
    }

    /// Leaves the intervals of thread `set` out of the period: it is not
    /// one thread sampled at the profiler's rate (see `v2_to_otlp`).
    pub(crate) fn leave_out_of_period(&mut self, set: u32) {
        self.set_unmeasured[set as usize] = true;
    }

    /// The Link every following sample carries (v1: the transaction).
    pub(crate) fn set_link(&mut self, link: i32) {
        self.link = link;
    }

    /// Records one Sentry sample.
    #[inline]
    pub(crate) fn push(&mut self, stack: i32, set: u32, ts: u64) {
        let row = &mut self.rows[set as usize];
        let slot = stack as usize;
        if slot >= row.len() {
            row.resize(slot + 1, u32::MAX);
        }
        if row[slot] == u32::MAX {
            row[slot] = self.samples.len() as u32;
            self.samples.push(Sample {
                stack_index: stack,
                attribute_indices: self.set_attrs[set as usize].clone(),
                link_index: self.link,
                values: Vec::new(),
                timestamps_unix_nano: Vec::new(),
            });
            self.sample_set.push(set);
        }
        self.points.push((row[slot], ts));

        let last = &mut self.set_last_ts[set as usize];
        if *last != 0 && !self.set_unmeasured[set as usize] {
            match ts.cmp(last) {
                std::cmp::Ordering::Greater => self.deltas.push(ts - *last),
                std::cmp::Ordering::Less => self.unsorted = true,
                std::cmp::Ordering::Equal => {}
            }
        }
        *last = ts;
        self.min_ts = self.min_ts.min(ts);
        self.max_ts = self.max_ts.max(ts);
    }

    /// Records a stretch of `ns` wall nanoseconds from `ts` in one stack
    /// (Android method traces); a builder takes spans or samples, not both.
    #[inline]
    pub(crate) fn push_span(&mut self, stack: i32, set: u32, ts: u64, ns: u64) {
        self.push(stack, set, ts);
        self.values.push(i64::try_from(ns).unwrap_or(i64::MAX));
        self.max_end = self.max_end.max(ts.saturating_add(ns));
    }

    /// Median interval between consecutive samples of one thread.
    fn period(&mut self) -> u64 {
        if self.unsorted {
            self.deltas.clear();
            let mut per_set: Vec<Vec<u64>> = vec![Vec::new(); self.set_attrs.len()];
            for &(i, ts) in &self.points {
                per_set[self.sample_set[i as usize] as usize].push(ts);
            }
            for (ts, _) in per_set
                .iter_mut()
                .zip(&self.set_unmeasured)
                .filter(|(_, &unmeasured)| !unmeasured)
            {
                ts.sort_unstable();
                self.deltas
                    .extend(ts.windows(2).map(|w| w[1] - w[0]).filter(|&d| d > 0));
            }
        }
        if self.deltas.is_empty() {
            return DEFAULT_PERIOD_NS;
        }
        let mid = self.deltas.len() / 2;
        *self.deltas.select_nth_unstable(mid).1
    }

    /// Moves the recorded timestamps into their samples, each sized exactly.
    fn gather(&mut self) {
        let mut counts = vec![0usize; self.samples.len()];
        for &(i, _) in &self.points {
            counts[i as usize] += 1;
        }
        for (s, n) in self.samples.iter_mut().zip(counts) {
            s.timestamps_unix_nano.reserve_exact(n);
        }
        for &(i, ts) in &self.points {
            self.samples[i as usize].timestamps_unix_nano.push(ts);
        }
        if !self.values.is_empty() {
            for s in &mut self.samples {
                s.values.reserve_exact(s.timestamps_unix_nano.len());
            }
            for (&(i, _), &v) in self.points.iter().zip(&self.values) {
                self.samples[i as usize].values.push(v);
            }
        }
    }

    pub(crate) fn accepted(&self) -> u64 {
        self.points.len() as u64
    }

    pub(crate) fn finish(
        mut self,
        profile_id: [u8; 16],
        resource: Vec<KeyValue>,
        scope: InstrumentationScope,
        original: Option<(&str, &[u8])>,
    ) -> ProfilesData {
        let period = self.period();
        self.gather();
        let spans = !self.values.is_empty();
        let (time, duration) = match (self.points.is_empty(), spans) {
            (true, _) => (0, 0),
            (false, true) => (self.min_ts, self.max_end - self.min_ts),
            (false, false) => (self.min_ts, self.max_ts - self.min_ts + period),
        };
        let sample_type = if spans {
            ValueType {
                type_strindex: self.dict.string("wall"),
                unit_strindex: self.dict.string("nanoseconds"),
            }
        } else {
            ValueType {
                type_strindex: self.dict.string("samples"),
                unit_strindex: self.dict.string("count"),
            }
        };
        let period_type = ValueType {
            type_strindex: self.dict.string("wall"),
            unit_strindex: self.dict.string("nanoseconds"),
        };
        let (original_payload_format, original_payload) = match original {
            Some((f, b)) => (f.to_owned(), b.to_vec()),
            None => (String::new(), Vec::new()),
        };
        let profile = Profile {
            sample_type: Some(sample_type),
            samples: self.samples,
            time_unix_nano: time,
            duration_nano: duration,
            period_type: Some(period_type),
            period: period as i64,
            profile_id: profile_id.to_vec(),
            dropped_attributes_count: 0,
            original_payload_format,
            original_payload,
            attribute_indices: self.profile_attrs,
        };
        ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                resource: Some(Resource {
                    attributes: resource,
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    scope: Some(scope),
                    profiles: vec![profile],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
            dictionary: Some(self.dict.finish()),
        }
    }

    /// The OTLP data and what the Sentry samples came to: every pushed
    /// sample accepted, `dropped` left out before.
    pub(crate) fn into_converted(
        self,
        profile_id: [u8; 16],
        resource: Vec<KeyValue>,
        sdk: Option<&ClientSdk>,
        original: Option<(&str, &[u8])>,
        dropped: Vec<(Reason, u64)>,
    ) -> Converted {
        let sentry_samples = self.accepted();
        let data = self.finish(profile_id, resource, scope(sdk), original);
        Converted {
            data,
            sentry_samples,
            dropped,
        }
    }

    /// `sentry.thread_metadata`: every thread the SDK described, with or without samples.
    pub(crate) fn thread_table_attr(&mut self, meta: &BTreeMap<CowStr, ThreadMeta>) {
        if meta.is_empty() {
            return;
        }
        let values = meta
            .iter()
            .map(|(id, t)| {
                let mut fields = Vec::new();
                if let Some(name) = &t.name {
                    fields.push(KeyValue {
                        key: "name".into(),
                        value: Some(str_value(name)),
                        ..Default::default()
                    });
                }
                if let Some(p) = t.priority {
                    fields.push(KeyValue {
                        key: "priority".into(),
                        value: Some(int_value(p)),
                        ..Default::default()
                    });
                }
                KeyValue {
                    key: id.to_string(),
                    value: Some(AnyValue {
                        value: Some(Value::KvlistValue(KeyValueList { values: fields })),
                    }),
                    ..Default::default()
                }
            })
            .collect();
        self.profile_attr(
            k::SENTRY_THREAD_METADATA,
            AnyValue {
                value: Some(Value::KvlistValue(KeyValueList { values })),
            },
        );
    }
}

/// What goes on the OTLP Resource.
#[derive(Default)]
pub(crate) struct ResourceInfo<'x> {
    pub platform: &'x str,
    pub release: Option<&'x str>,
    pub environment: Option<&'x str>,
    pub sdk_name: Option<&'x str>,
    pub sdk_version: Option<&'x str>,
    pub extra: Vec<(&'static str, AnyValue)>,
}

pub(crate) fn resource_attributes(info: ResourceInfo, opts: &ReceiveOptions) -> Vec<KeyValue> {
    let kv = |key: &str, value: AnyValue| KeyValue {
        key: key.to_owned(),
        value: Some(value),
        ..Default::default()
    };
    let release = info.release.filter(|r| !r.is_empty());
    let service = match (&opts.service_name, release) {
        (Some(s), _) if !s.is_empty() => s.clone(),
        (_, Some(r)) => r
            .split('@')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or(r)
            .to_owned(),
        _ => "unknown_service".to_owned(),
    };
    let mut out = vec![kv(k::SERVICE_NAME, str_value(&service))];
    if let Some(r) = release {
        out.push(kv(k::SERVICE_VERSION, str_value(r)));
    }
    if let Some(e) = info.environment.filter(|e| !e.is_empty()) {
        out.push(kv(k::DEPLOYMENT_ENVIRONMENT, str_value(e)));
    }
    if let Some(n) = info.sdk_name {
        out.push(kv(k::SDK_NAME, str_value(n)));
    }
    if let Some(v) = info.sdk_version {
        out.push(kv(k::SDK_VERSION, str_value(v)));
    }
    if let Some(l) = sdk_language(info.platform) {
        out.push(kv(k::SDK_LANGUAGE, str_value(l)));
    }
    if let Some(p) = opts.project_id.as_deref().filter(|p| !p.is_empty()) {
        out.push(kv(k::SENTRY_PROJECT_ID, str_value(p)));
    }
    for (key, value) in info.extra {
        out.push(kv(key, value));
    }
    out
}

pub(crate) fn scope(sdk: Option<&ClientSdk>) -> InstrumentationScope {
    InstrumentationScope {
        name: sdk
            .and_then(|s| s.name.as_deref())
            .unwrap_or("sentry")
            .to_owned(),
        version: sdk
            .and_then(|s| s.version.as_deref())
            .unwrap_or("")
            .to_owned(),
        ..Default::default()
    }
}

/// Refuses an item over `opts.max_item_size`; `what` names it.
pub(crate) fn check_size(
    payload: &[u8],
    opts: &ReceiveOptions,
    what: &str,
) -> Result<(), ItemError> {
    if payload.len() > opts.max_item_size {
        return Err(ItemError::new(
            Reason::TooLarge,
            format!(
                "{what} of {} bytes exceeds the limit of {} bytes",
                payload.len(),
                opts.max_item_size
            ),
        ));
    }
    Ok(())
}

pub(crate) fn invalid_json(e: impl std::fmt::Display) -> ItemError {
    ItemError::new(Reason::InvalidJson, format!("invalid profile JSON: {e}"))
}

/// Parses `debug_meta` for its images; an unreadable one refuses the item
/// as Relay would.
pub(crate) fn parse_debug_meta<'a>(
    raw: Option<&'a serde_json::value::RawValue>,
) -> Result<DebugMeta<'a>, ItemError> {
    match raw {
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|e| invalid_json(format_args!("debug_meta: {e}"))),
        None => Ok(DebugMeta::default()),
    }
}

/// A chunk's item header `platform`, when it has one, must be the
/// payload's, as Relay requires (it refuses a mismatch as an invalid profile
/// type; a header without `platform` takes the payload's).
pub(crate) fn check_item_platform(item: Option<&str>, payload: &str) -> Result<(), ItemError> {
    match item {
        Some(p) if p != payload => Err(ItemError::new(
            Reason::InvalidProfileType,
            format!(
                "item header platform {p:?} (a {} profile) is not the payload's {payload:?} (a {} profile)",
                ProfileType::from_platform(p).as_str(),
                ProfileType::from_platform(payload).as_str(),
            ),
        )),
        _ => Ok(()),
    }
}

/// The envelope header's `sdk` ({name, version}), for payloads that name none.
pub(crate) fn envelope_sdk(header: &serde_json::Value) -> Option<ClientSdk<'_>> {
    use serde::Deserialize;
    header
        .get("sdk")
        .and_then(|s| ClientSdk::deserialize(s).ok())
}

/// A JVM frame of sentry-java names the method alone (`run`) and its class
/// in `filename` (`java.lang.Thread`): the function is named
/// `java.lang.Thread.run`, as JFR, Android and the eBPF profiler name
/// JVM frames, so that a flame graph tells the `run`s apart. A name that
/// is already qualified, or a `filename` that is a source file, is left;
/// the `sentry` exporter gives the SDK's own name back (`v2::from_otlp`).
fn jvm_method_name(frame_type: Option<&str>, name: &str, file: Option<&str>) -> Option<String> {
    let class = file?;
    let bare = !name.is_empty() && !name.contains('.');
    let source = class.contains('/')
        || [".java", ".kt", ".kts", ".scala", ".groovy", ".clj"]
            .iter()
            .any(|ext| class.ends_with(ext));
    (frame_type == Some("jvm") && bare && !source).then(|| format!("{class}.{name}"))
}
