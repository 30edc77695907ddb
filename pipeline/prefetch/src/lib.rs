//! Software prefetch for passes over samples.
//!
//! A profile's samples are streamed in order, which the CPU prefetches by
//! itself, but each sample's vectors and the tables its indices point into
//! are read at random: a pass that asks for those a few samples early (see
//! [`AHEAD`]) overlaps their cache misses instead of waiting for each.
//!
//! A sample's vectors are the costly part in a long-running process: each
//! is its own small allocation, and once the heap has served a few batches
//! it hands them out scattered, so that every one is a miss (freeing one
//! too: the allocator writes into the block). On the bench request, with
//! the heap of a loop that keeps the last two batches (where prost decode
//! itself runs twice as slow as on a fresh heap), fetching them ahead
//! halves the time of `thread_pruning` and of the collection after it.

//!
//! The workspace's one crate with `unsafe` code (prefetch intrinsics and
//! the in-place compaction of [`retain_ahead`]; see each block's SAFETY):
//! every other crate denies it, and sees only these functions.

#![deny(unsafe_op_in_unsafe_fn)]

/// How many samples ahead a pass asks for what a sample will need: enough to
/// cover a miss to memory at a few nanoseconds of work per sample, few
/// enough that the lines are still cached when used (on a scattered heap, 8
/// left the lighter passes waiting; 24 gained nothing more).
pub const AHEAD: usize = 16;

/// Asks the CPU to bring the cache line at `p` in, without waiting for it.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    // Miri has no prefetch intrinsic; a hint changes no result.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

/// Fetches the first line of `v`'s block (none for an empty vector, whose
/// pointer is dangling).
#[inline(always)]
pub fn prefetch_slice<T>(v: &[T]) {
    if !v.is_empty() {
        prefetch(v.as_ptr());
    }
}

/// Fetches both ends of the element at `p` (elements larger than a line
/// may straddle two), for a pass that reads the element itself ahead.
#[inline(always)]
pub fn prefetch_element<T>(p: *const T) {
    prefetch(p);
    let last = std::mem::size_of::<T>().saturating_sub(1);
    prefetch(p.cast::<u8>().wrapping_add(last));
}

/// The element [`AHEAD`] places after `k` in `items`, for a pass at `k` to
/// prefetch what that one will need; the element twice as far is fetched
/// itself, so that reading this one does not wait (a pass over samples
/// reads their array at its leading edge, ahead of the hardware's own
/// prefetch).
#[inline(always)]
pub fn ahead<T>(items: &[T], k: usize) -> Option<&T> {
    prefetch_element(items.as_ptr().wrapping_add(k + 2 * AHEAD));
    items.get(k + AHEAD)
}

/// `v.retain_mut(keep)`, where `keep` also sees the element [`AHEAD`]
/// places further on (not visited yet, `None` near the end), to prefetch
/// what that one will need.
pub fn retain_ahead<T>(v: &mut Vec<T>, keep: impl FnMut(&mut T, Option<&T>) -> bool) {
    let n = v.len();
    // While this runs the vector owns nothing; the guard gives it back what
    // it holds even when `keep` panics: the kept elements, then the ones
    // not visited yet (the one `keep` panicked on among them), as
    // `Vec::retain` does.
    // SAFETY: 0 is within the capacity; the guard sets the length back.
    unsafe { v.set_len(0) };
    let mut g = Compaction {
        p: v.as_mut_ptr(),
        v,
        n,
        read: 0,
        write: 0,
    };
    g.run(keep);
}

/// The state of [`retain_ahead`]'s pass: elements `..write` are kept,
/// `read..n` not visited yet, and the rest moved or dropped.
struct Compaction<'a, T> {
    v: &'a mut Vec<T>,
    p: *mut T,
    n: usize,
    read: usize,
    write: usize,
}

impl<T> Compaction<'_, T> {
    fn run(&mut self, mut keep: impl FnMut(&mut T, Option<&T>) -> bool) {
        let (p, n) = (self.p, self.n);
        while self.read < n {
            let r = self.read;
            // SAFETY: r and r + AHEAD (when < n) index initialized elements
            // of the buffer: those at r and past it are still in place,
            // unvisited, as kept ones only move back (to write <= r). Each
            // element is either moved once, to write, or dropped once.
            unsafe {
                // As `ahead`, on a buffer whose first elements are moved.
                prefetch_element(p.wrapping_add(r + 2 * AHEAD));
                let next = (r + AHEAD < n).then(|| &*p.add(r + AHEAD));
                if keep(&mut *p.add(r), next) {
                    if self.write != r {
                        std::ptr::copy_nonoverlapping(p.add(r), p.add(self.write), 1);
                    }
                    self.write += 1;
                    self.read += 1;
                } else {
                    // Visited before the drop: a panicking drop leaves it
                    // out of what the guard gives back.
                    self.read += 1;
                    std::ptr::drop_in_place(p.add(r));
                }
            }
        }
    }
}

impl<T> Drop for Compaction<'_, T> {
    fn drop(&mut self) {
        let rest = self.n - self.read;
        // SAFETY: `read..n` are initialized and unvisited; they move right
        // behind the kept ones (the ranges may overlap), which makes
        // `..write + rest` the initialized prefix.
        unsafe {
            if rest > 0 && self.read != self.write {
                std::ptr::copy(self.p.add(self.read), self.p.add(self.write), rest);
            }
            self.v.set_len(self.write + rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ahead_shows_the_element_ahead_and_none_past_the_end() {
        for n in [0, 1, AHEAD, AHEAD + 1, 3 * AHEAD] {
            let v: Vec<usize> = (0..n).collect();
            for k in 0..n + 2 {
                assert_eq!(ahead(&v, k), v.get(k + AHEAD));
            }
        }
    }

    #[test]
    fn retain_ahead_keeps_what_retain_keeps_and_shows_what_comes() {
        for n in [0, 1, AHEAD, AHEAD + 1, 100] {
            let mut v: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            let mut seen = Vec::new();
            retain_ahead(&mut v, |s, next| {
                seen.push(next.cloned());
                s.parse::<usize>().unwrap() % 3 != 1
            });
            let want: Vec<String> = (0..n)
                .filter(|i| i % 3 != 1)
                .map(|i| i.to_string())
                .collect();
            assert_eq!(v, want);
            let ahead: Vec<Option<String>> = (0..n)
                .map(|i| (i + AHEAD < n).then(|| (i + AHEAD).to_string()))
                .collect();
            assert_eq!(seen, ahead);
        }
    }

    #[test]
    fn a_panic_in_keep_keeps_what_is_left_as_retain_does() {
        let mut v: Vec<String> = (0..3 * AHEAD).map(|i| i.to_string()).collect();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            retain_ahead(&mut v, |s, _| {
                assert_ne!(s, "20", "a processor bug");
                s.len() == 1
            })
        }));
        assert!(r.is_err());
        // As `Vec::retain`: what was kept, then what was not visited yet,
        // from the element it panicked on (under Miri, a double drop, a
        // leak or a read of a moved element fails this test).
        let want: Vec<String> = (0..3 * AHEAD)
            .map(|i| i.to_string())
            .filter(|s| s.len() == 1 || s.parse::<usize>().unwrap() >= 20)
            .collect();
        assert_eq!(v, want);
    }
}
