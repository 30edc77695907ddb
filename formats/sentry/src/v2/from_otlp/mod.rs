//! OTLP -> Sentry `profile_chunk`s (sample format v2).
//!
//! One chunk per session and time window (at most 66 s, Relay's limit, and
//! at most 50 MiB of JSON). Profiles of one resource (by value) with the
//! same attributes and sample type come from one process and session:
//! they share chunks, as an SDK's profiler sends one chunk per window
//! however many pieces it recorded (see `sessions`). Timestamped samples keep their timestamps;
//! aggregated ones are expanded (see `expand`). Every chunk passes
//! [`check_v2`](super::relay_rules::check_v2) before it is offered for sending; what Relay would refuse is
//! counted with the reason instead. Profiles that are not stacks sampled
//! over time, or repeat another Profile's samples under another sample
//! type, are not sent (see `select`).
//!
//! Accounting: a Sentry sample is one point; an OTLP Sample counts as sent
//! iff its first point is sent, so per chunk `otlp_samples` plus the OTLP
//! part of `dropped`, summed over a profile's results, is exactly the
//! profile's number of OTLP Samples.

mod address;
mod dict;
mod emit;
mod expand;
mod frames;
mod images;
mod meta;
mod points;
mod select;
mod sessions;
mod threads;
mod windows;

pub(crate) use emit::chunk_id;
pub(crate) use points::time_unit_ns;

use std::time::{SystemTime, UNIX_EPOCH};

use self::expand::thin;
use self::frames::Frames;
use self::images::Images;
use self::meta::Meta;
use self::threads::Threads;
use crate::v2::outgoing::ProfileChunk;
use crate::v2::relay_rules::MAX_CHUNK_DURATION_NS;
use crate::{android, ids, keys as k};
use crate::{Reason, MAX_ITEM_SIZE};
use profcol_model::bounds::{late_time, MAX_PROFILE_DURATION_NS};
use profcol_model::dictionary::Lookup;
use profcol_model::proto::{KeyValue, Profile, ProfilesData};

#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Most Sentry samples in one chunk, timestamped or spread from
    /// aggregated values; a fuller chunk is thinned evenly and the rest
    /// counted as dropped.
    pub max_samples_per_chunk: usize,
    /// Longest time window of one chunk; at most 66 s.
    pub max_chunk_duration_ns: u64,
    /// Largest chunk JSON; bigger windows are split.
    pub max_chunk_bytes: usize,
    /// Stands in for a profile's missing `time_unix_nano` (unix ns).
    pub now_unix_nano: u64,
    /// Platform of a profile whose data names none (else `native`).
    pub default_platform: Option<String>,
    /// Random, made once per exporter: goes into the `profiler_id` of
    /// resources that name no process (no `service.instance.id`,
    /// `host.name` or `process.pid`), so that replicas of one service do
    /// not share a profiler session. The default is made once per process.
    pub instance_id: [u8; 16],
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            max_samples_per_chunk: 100_000,
            max_chunk_duration_ns: MAX_CHUNK_DURATION_NS,
            max_chunk_bytes: MAX_ITEM_SIZE,
            now_unix_nano: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            default_platform: None,
            instance_id: process_instance_id(),
        }
    }
}

/// A random id made on first use, the same for the rest of the process.
fn process_instance_id() -> [u8; 16] {
    static ID: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    *ID.get_or_init(ids::random_uuid)
}

/// Samples left out, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub reason: Reason,
    /// Sentry samples (points).
    pub sentry_samples: u64,
    /// OTLP Samples whose first point was among them.
    pub otlp_samples: u64,
}

/// One chunk (or what was refused in its place).
#[derive(Debug, Clone)]
pub struct ChunkResult {
    /// The chunk after Relay's rules; `None` when nothing is to be sent.
    pub chunk: Option<ProfileChunk>,
    /// The chunk's JSON (empty when `chunk` is `None`).
    pub payload: Vec<u8>,
    /// Sentry samples in the chunk.
    pub sentry_samples: u64,
    /// OTLP Samples sent with this chunk (their first point is in it).
    pub otlp_samples: u64,
    pub dropped: Vec<Dropped>,
}

impl ChunkResult {
    pub(crate) fn refused(dropped: Vec<Dropped>) -> Self {
        Self {
            chunk: None,
            payload: Vec::new(),
            sentry_samples: 0,
            otlp_samples: 0,
            dropped,
        }
    }
}

/// Converts every Profile of `data` to chunks.
pub fn otlp_to_chunks(data: &ProfilesData, opts: &ExportOptions) -> Vec<ChunkResult> {
    let dict = Lookup::of(data);
    let mut out = Vec::new();
    let mut sessions = sessions::Sessions::default();
    for rp in &data.resource_profiles {
        let resource = rp.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        for sp in &rp.scope_profiles {
            let verdicts = select::select(dict, &sp.profiles);
            for (profile, verdict) in sp.profiles.iter().zip(verdicts) {
                match verdict {
                    None => sessions.add(dict, resource, profile),
                    Some(_) if profile.samples.is_empty() => {}
                    Some(reason) => out.push(ChunkResult::refused(vec![select::all_dropped(
                        profile, reason,
                    )])),
                }
            }
        }
    }
    for (resource, profiles) in sessions.into_groups() {
        ProfileExport::new(dict, resource, profiles[0], opts).run(&profiles, &mut out);
    }
    out
}

/// Everything chunks of one Profile share.
struct ProfileExport<'d> {
    dict: Lookup<'d>,
    resource: &'d [KeyValue],
    profile: &'d Profile,
    opts: &'d ExportOptions,
    frames: Frames<'d>,
    threads: Threads<'d>,
    images: Images<'d>,
    chunks_made: u64,
}

impl<'d> ProfileExport<'d> {
    fn new(
        dict: Lookup<'d>,
        resource: &'d [KeyValue],
        profile: &'d Profile,
        opts: &'d ExportOptions,
    ) -> Self {
        Self {
            dict,
            resource,
            profile,
            opts,
            frames: Frames::new(dict),
            threads: Threads::new(dict),
            images: Images::new(dict),
            chunks_made: 0,
        }
    }

    /// A profile whose source was Android goes back as Android chunks.
    fn android(&self, out: &mut Vec<ChunkResult>) {
        let meta = Meta::new(
            self.dict,
            self.resource,
            self.profile,
            self.opts,
            &self.frames,
        );
        let pid = dict::resource_text(self.resource, k::PROCESS_PID).and_then(|p| p.parse().ok());
        let meta = android::export::ChunkMeta {
            profiler_id: meta.profiler_id,
            profile_id: meta.profile_id,
            release: meta.release,
            environment: meta.environment,
            client_sdk: meta.client_sdk,
            debug_meta: meta.received_debug_meta.flatten(),
            pid,
        };
        android::export::export(self.dict, self.profile, &meta, out);
    }

    /// Chunks of `profiles`, one session (`profiles[0]` is `self.profile`).
    fn run(mut self, profiles: &[&'d Profile], out: &mut Vec<ChunkResult>) {
        let mut points = Vec::new();
        for &profile in profiles {
            // Times no recording has would drive the window loop and the
            // expansion below: refused before any work.
            if late_time(profile).is_some() || profile.duration_nano > MAX_PROFILE_DURATION_NS {
                out.push(ChunkResult::refused(vec![select::all_dropped(
                    profile,
                    Reason::ImplausibleTime,
                )]));
                continue;
            }
            let pa = &profile.attribute_indices;
            if dict::android_trace(self.dict, pa) {
                // Android profiles are never grouped (see `sessions`).
                self.android(out);
                return;
            }
            let (pts, pre_dropped) = points::points(
                self.dict,
                profile,
                self.opts,
                &mut self.frames,
                &mut self.threads,
            );
            if !pre_dropped.is_empty() {
                out.push(ChunkResult::refused(pre_dropped));
            }
            if points.is_empty() {
                points = pts;
            } else {
                points.extend(pts);
            }
        }
        if points.is_empty() {
            return;
        }
        points.sort_by_key(|p| p.ts);
        let windows = windows::windows(&points, self.opts.max_chunk_duration_ns);
        let mut meta = Meta::new(
            self.dict,
            self.resource,
            self.profile,
            self.opts,
            &self.frames,
        );
        // Each window takes the measurements that fall in it.
        let mut measurements = match meta.measurements.take() {
            Some(m) if windows.len() > 1 => {
                let starts: Vec<u64> = windows.iter().map(|w| points[w.start].ts).collect();
                windows::split_measurements(&m, &starts)
            }
            m => vec![m],
        }
        .into_iter();
        // A window of several profiles is cut at the sample cap rather
        // than thinned: each of them alone would have gone whole.
        let cap = self.opts.max_samples_per_chunk.max(1);
        let pieces = windows.into_iter().flat_map(|w| {
            let first = w.start;
            let cut = if profiles.len() > 1 {
                cap
            } else {
                w.len().max(1)
            };
            (w.start..w.end)
                .step_by(cut)
                .map(move |s| (s == first, s..(s + cut).min(w.end)))
        });
        for (first_piece, w) in pieces {
            if first_piece {
                meta.measurements = measurements.next().flatten();
            } else {
                meta.measurements = None;
            }
            let mut pts = points[w].to_vec();
            let (thinned, thinned_homes) = thin(&mut pts, self.opts.max_samples_per_chunk.max(1));
            let mut dropped = Vec::new();
            if thinned > 0 {
                dropped.push(Dropped {
                    reason: Reason::MaxSamplesPerChunk,
                    sentry_samples: thinned,
                    otlp_samples: thinned_homes,
                });
            }
            self.emit(&pts, &meta, dropped, out);
        }
    }
}
