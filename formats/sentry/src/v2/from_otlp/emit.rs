//! Chunks of a Profile's points: each built with only the stacks, frames
//! and threads its points use, checked against Relay's rules and split in
//! two while its JSON is too large.

use std::collections::BTreeMap;

use hashbrown::HashMap;

use super::expand::Point;
use super::meta::Meta;
use super::threads::thread_table;
use super::{ChunkResult, Dropped, ProfileExport};
use crate::ids;
use crate::v2::outgoing::{ChunkProfile, ChunkSample, ProfileChunk, ThreadMetadata};
use crate::v2::relay_rules::check_v2;
use crate::Reason;

impl ProfileExport<'_> {
    fn next_chunk_id(&mut self, meta: &Meta) -> String {
        let n = self.chunks_made;
        self.chunks_made += 1;
        chunk_id(meta.profile_id, n)
    }

    /// Builds, checks and serializes the chunk of `pts`; splits it in two
    /// when its JSON is over the size limit.
    pub(super) fn emit(
        &mut self,
        pts: &[Point],
        meta: &Meta,
        mut dropped: Vec<Dropped>,
        out: &mut Vec<ChunkResult>,
    ) {
        let mut chunk = self.build(pts, meta);
        let homes = pts.iter().filter(|p| p.home).count() as u64;
        let pruned = match check_v2(&mut chunk) {
            Ok(p) => p,
            Err(reason) => {
                dropped.push(Dropped {
                    reason,
                    sentry_samples: pts.len() as u64,
                    otlp_samples: homes,
                });
                out.push(ChunkResult::refused(dropped));
                return;
            }
        };
        let payload = chunk.to_json();
        if payload.len() > self.opts.max_chunk_bytes {
            if pts.len() > 1 {
                let mid = pts.len() / 2;
                self.chunks_made -= 1;
                self.emit(&pts[..mid], meta, dropped, out);
                self.emit(&pts[mid..], meta, Vec::new(), out);
            } else {
                self.chunks_made -= 1;
                dropped.push(Dropped {
                    reason: Reason::TooLarge,
                    sentry_samples: pts.len() as u64,
                    otlp_samples: homes,
                });
                out.push(ChunkResult::refused(dropped));
            }
            return;
        }
        if pruned.samples > 0 {
            dropped.push(Dropped {
                reason: Reason::SingleSampleThread,
                sentry_samples: pruned.samples,
                otlp_samples: pruned.homes,
            });
        }
        out.push(ChunkResult {
            sentry_samples: chunk.profile.samples.len() as u64,
            otlp_samples: homes - pruned.homes,
            chunk: Some(chunk),
            payload,
            dropped,
        });
    }

    /// A chunk holding `pts`, with only the stacks, frames and threads they use.
    fn build(&mut self, pts: &[Point], meta: &Meta) -> ProfileChunk {
        let mut stack_map: HashMap<u32, u32> = HashMap::new();
        let mut frame_map: HashMap<u32, u32> = HashMap::new();
        let mut thread_map: HashMap<u32, u32> = HashMap::new();
        let mut profile = ChunkProfile::default();
        profile.samples.reserve(pts.len());
        for p in pts {
            let stack_id = match stack_map.get(&p.stack) {
                Some(&s) => s,
                None => {
                    let frames = self.frames.stacks[p.stack as usize]
                        .iter()
                        .map(|&f| {
                            *frame_map.entry(f).or_insert_with(|| {
                                profile
                                    .frames
                                    .push(self.frames.chunk_frame(f, &meta.platform));
                                (profile.frames.len() - 1) as u32
                            })
                        })
                        .collect();
                    profile.stacks.push(frames);
                    let s = (profile.stacks.len() - 1) as u32;
                    stack_map.insert(p.stack, s);
                    s
                }
            };
            let thread = *thread_map.entry(p.thread).or_insert_with(|| {
                profile
                    .thread_ids
                    .push(self.threads.threads[p.thread as usize].id.clone());
                (profile.thread_ids.len() - 1) as u32
            });
            profile.samples.push(ChunkSample {
                timestamp_unix_nano: p.ts,
                stack_id,
                thread,
                home: p.home,
            });
        }
        let table = thread_table(self.dict, &self.profile.attribute_indices);
        let mut thread_metadata = BTreeMap::new();
        for &t in thread_map.keys() {
            let info = &self.threads.threads[t as usize];
            let (tname, priority) = table.get(info.id.as_str()).copied().unwrap_or_default();
            let name = info.name.clone().or_else(|| tname.map(str::to_owned));
            let priority = info.priority.or(priority);
            if name.is_some() || priority.is_some() {
                thread_metadata.insert(info.id.clone(), ThreadMetadata { name, priority });
            }
        }
        profile.thread_metadata = thread_metadata;
        let debug_meta =
            self.images
                .chunk_debug_meta(meta, &self.frames, frame_map.keys().copied());
        ProfileChunk {
            chunk_id: self.next_chunk_id(meta),
            profiler_id: meta.profiler_id.clone(),
            debug_meta,
            environment: meta.environment.clone(),
            platform: meta.platform.clone(),
            release: meta.release.clone(),
            client_sdk: meta.client_sdk.clone(),
            version: "2",
            measurements: meta.measurements.clone(),
            profile,
            android: None,
        }
    }
}

/// The id of a profile's `n`-th chunk: the first is the profile's own id,
/// later ones derive from it (random when the profile has none).
pub(crate) fn chunk_id(profile_id: Option<[u8; 16]>, n: u64) -> String {
    let id = match (profile_id, n) {
        (Some(id), 0) => id,
        (Some(id), n) => ids::stable_uuid(&[id.as_slice(), n.to_be_bytes().as_slice()]),
        (None, _) => ids::random_uuid(),
    };
    ids::format_uuid(&id)
}
