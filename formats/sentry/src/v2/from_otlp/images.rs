//! `debug_meta` of the chunks: as received, else an image per mapping the
//! chunk's frames come from, each one Relay would read.

use hashbrown::HashMap;

use super::address;
use super::dict::{attr_text, nonempty};
use super::frames::Frames;
use super::meta::Meta;
use crate::ids;
use crate::keys as k;
use crate::v2::outgoing::DebugMeta;
use crate::v2::relay_rules::{relay_reads_image, RELAY_IMAGE_TYPES};
use profcol_model::dictionary::Lookup;

/// `debug_meta` as received (`sentry.debug_meta`), without the images
/// Relay could not read; `None` when nothing was received.
pub(super) fn received_debug_meta(
    d: Lookup<'_>,
    profile_attrs: &[i32],
) -> Option<Option<DebugMeta>> {
    let raw = attr_text(d, profile_attrs, k::SENTRY_DEBUG_META)?;
    let serde_json::Value::Object(mut m) = serde_json::from_str(&raw).ok()? else {
        return None;
    };
    let Some(serde_json::Value::Array(images)) = m.remove("images") else {
        return None;
    };
    let images: Vec<_> = images.into_iter().filter(relay_reads_image).collect();
    Some((!images.is_empty()).then_some(DebugMeta { images }))
}

/// Images of the profile's mappings, each made once.
pub(super) struct Images<'d> {
    dict: Lookup<'d>,
    /// `debug_meta` image per mapping index (`None`: none Relay would read).
    mapping_images: HashMap<i32, Option<serde_json::Value>>,
}

impl<'d> Images<'d> {
    pub(super) fn new(dict: Lookup<'d>) -> Self {
        Self {
            dict,
            mapping_images: HashMap::new(),
        }
    }

    /// The `debug_meta` image of mapping `m`, if it has a build id or a
    /// debug id, and Relay would read it (an image with an unreadable
    /// `debug_id` would fail the whole chunk: it is left out alone).
    fn mapping_image(&mut self, m: i32, placed: bool) -> Option<serde_json::Value> {
        if let Some(img) = self.mapping_images.get(&m) {
            return img.clone();
        }
        let (d, mi) = (self.dict, m);
        // Out of range reads as the zero mapping, which names no image.
        let img = (m > 0)
            .then(|| d.mapping(m))
            .and_then(|m| {
                let attr = |key| nonempty(attr_text(d, &m.attribute_indices, key));
                let gnu = attr(k::BUILD_ID_GNU).and_then(|h| hex::decode(h).ok());
                let debug_id = attr(k::SENTRY_DEBUG_ID)
                    .or_else(|| gnu.as_deref().and_then(ids::debug_id_from_build_id))?;
                let code_id = attr(k::SENTRY_CODE_ID).or_else(|| gnu.as_ref().map(hex::encode));
                let ty = attr(k::SENTRY_IMAGE_TYPE)
                    .filter(|t| RELAY_IMAGE_TYPES.contains(&t.as_str()))
                    .unwrap_or_else(|| "symbolic".to_owned());
                let mut img = serde_json::Map::new();
                img.insert("type".into(), ty.into());
                img.insert("debug_id".into(), debug_id.into());
                if let Some(c) = code_id {
                    img.insert("code_id".into(), c.into());
                }
                let file = d.string(m.filename_strindex);
                if !file.is_empty() {
                    img.insert("code_file".into(), file.into());
                }
                if let Some(f) = attr(k::SENTRY_DEBUG_FILE) {
                    img.insert("debug_file".into(), f.into());
                }
                if let Some(a) = attr(k::SENTRY_ARCH) {
                    img.insert("arch".into(), a.into());
                }
                // A file placed in a region (its frames addressed in the
                // file): the image starts at its load base there, and says
                // that base as its own load address.
                let (start, limit, vmaddr) = match placed.then(|| address::region(mi)).flatten() {
                    Some(r) => {
                        let base = address::load_base(m);
                        let start = r.checked_add(base)?;
                        let size = m.memory_limit.saturating_sub(base);
                        (
                            start,
                            start.saturating_add(size),
                            Some(base).filter(|&b| b > 0),
                        )
                    }
                    // Addressed in the process: the image still starts at
                    // the file's load base, where its offset 0 is mapped (a
                    // pprof mapping of libc's text at offset 0x28000 starts
                    // 0x28000 past it), so symbolicator's `instruction_addr
                    // - image_addr` is the address in the file.
                    None => (
                        address::load_base(m),
                        m.memory_limit,
                        attr(k::SENTRY_IMAGE_VMADDR).and_then(|v| v.parse::<u64>().ok()),
                    ),
                };
                img.insert("image_addr".into(), format!("{start:#x}").into());
                if limit > start {
                    img.insert("image_size".into(), (limit - start).into());
                }
                if let Some(vm) = vmaddr {
                    img.insert("image_vmaddr".into(), format!("{vm:#x}").into());
                }
                Some(serde_json::Value::Object(img))
            })
            .filter(relay_reads_image);
        self.mapping_images.insert(m, img.clone());
        img
    }

    /// `debug_meta` of a chunk holding the (profile-wide) `frames`: as
    /// received, else the images of the mappings those frames come from,
    /// in mapping table order.
    pub(super) fn chunk_debug_meta(
        &mut self,
        meta: &Meta,
        frames: &Frames,
        frame_ids: impl Iterator<Item = u32>,
    ) -> Option<DebugMeta> {
        if let Some(received) = &meta.received_debug_meta {
            return received.clone();
        }
        let mut mappings: Vec<i32> = frame_ids
            .flat_map(|f| frames.frame_mappings[f as usize].iter().copied())
            .collect();
        mappings.sort_unstable();
        mappings.dedup();
        let images: Vec<_> = mappings
            .into_iter()
            .filter_map(|m| self.mapping_image(m, frames.placed.contains(&m)))
            .collect();
        (!images.is_empty()).then_some(DebugMeta { images })
    }
}
