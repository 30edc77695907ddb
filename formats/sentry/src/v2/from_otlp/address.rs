//! Native addresses as Sentry reads them: every `instruction_addr` of a
//! chunk in one address space, each in the range of the debug image it
//! belongs to, and `instruction_addr - image_addr` an address in the file
//! (symbolicator adds the file's own load address).
//!
//! The eBPF profiler sends a native frame's address in its file's own
//! space (0x11e4 in a PIE whose text starts at 0x1000), where the files of
//! one process overlap. Such a file is given a region of its own here, one
//! TiB per mapping index, and its frames and image are placed in it.

use profcol_model::dictionary::Lookup;
use profcol_model::proto::{Location, Mapping};

use super::dict::attr_text;
use crate::keys as k;

/// Whether `loc` is a machine frame addressed in its file (the eBPF
/// profiler's `native` and `kernel` frames), not in a process: typed, and
/// its mapping not a debug image a Sentry SDK sent.
pub(super) fn in_file_space(d: Lookup<'_>, loc: &Location, frame_type: Option<&str>) -> bool {
    matches!(frame_type, Some("native" | "kernel"))
        && loc.mapping_index > 0
        && attr_text(
            d,
            &d.mapping(loc.mapping_index).attribute_indices,
            k::SENTRY_IMAGE_TYPE,
        )
        .is_none()
}

/// Where the file of mapping `m` is placed.
pub(super) fn region(m: i32) -> Option<u64> {
    u64::try_from(m).ok()?.checked_mul(1 << 40)
}

/// Where the file's offset 0 lies in the mapping's space, the mapping
/// starting at its segment (text at 0x1000, offset 0x1000), taking the
/// segment's address in the file to be its offset, as pprof does.
pub(super) fn load_base(m: &Mapping) -> u64 {
    m.memory_start
        .checked_sub(m.file_offset)
        .unwrap_or(m.memory_start)
}
