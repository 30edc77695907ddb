//! mimalloc's levers for the memory guard (`profcol_model::memory`):
//! how long freed memory is kept before it is returned to the OS, and a
//! collection that returns it now.
//!
//! mimalloc keeps freed pages for `purge_delay` (1 s in v3) so that the next
//! batch reuses them instead of taking fresh pages the kernel must zero:
//! that saves about a quarter of the CPU of a busy pipeline, at the price of
//! resident memory. Near the memory limit the guard sets the delay to 1 ms.
//!
//! Transparent huge pages are turned off for the process: mimalloc asks for
//! them on its arenas, and the kernel's khugepaged then fills 2 MiB pages
//! behind memory mimalloc had returned, so that an idle collector grew by
//! 16 MiB in 40 s (and peaked 30 MiB higher under load).

// mimalloc's C API (options and collection): see each block's SAFETY.
#![allow(unsafe_code)]

use libmimalloc_sys as mi;

/// `mi_option_purge_delay` in mimalloc v3's `mimalloc.h` (the crate's
/// constants follow v2's numbering).
const PURGE_DELAY: mi::mi_option_t = 15;

static DEFAULT_DELAY: std::sync::OnceLock<std::ffi::c_long> = std::sync::OnceLock::new();

fn pressure(on: bool) {
    // SAFETY: mimalloc's options are plain integers, safe to read and set
    // from any thread at any time.
    unsafe {
        let default = *DEFAULT_DELAY.get_or_init(|| mi::mi_option_get(PURGE_DELAY));
        // 1 ms, not 0: at 0 mimalloc purges at free time and no longer
        // looks at purges already scheduled, which would stay resident.
        mi::mi_option_set(PURGE_DELAY, if on { 1 } else { default });
    }
}

fn collect() {
    // SAFETY: no preconditions; returns freed memory to the OS.
    unsafe { mi::mi_collect(true) }
}

fn committed() -> usize {
    let mut commit = 0usize;
    // SAFETY: mi_process_info writes only through the non-null pointers it
    // is given; null ones are skipped.
    unsafe {
        mi::mi_process_info(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut commit,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
    commit
}

/// Hands mimalloc's levers to the memory guard.
pub fn install() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with these arguments only sets a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    // SAFETY: as in `pressure`.
    DEFAULT_DELAY.get_or_init(|| unsafe { mi::mi_option_get(PURGE_DELAY) });
    profcol_model::memory::set_allocator(profcol_model::memory::Allocator {
        pressure,
        collect,
        committed,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_number_is_v3s_purge_delay() {
        // v3's default purge delay is 1000 ms; another option at 15 would
        // not have that default.
        let v = unsafe { mi::mi_option_get(PURGE_DELAY) };
        assert_eq!(v, 1000, "mimalloc's option 15 is not purge_delay");
    }
}
