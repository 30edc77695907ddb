//! The points of folded samples: set aside as the samples go, then ordered
//! by group and appended to the samples kept.

use profcol_model::proto::Sample;
use profcol_prefetch::{prefetch, AHEAD};

/// Appends to the points (`field`) of each sample `g` its group's share of
/// `points`, which ends at `ends[g]`. The appends write to the samples' own
/// blocks, at random in memory: each is fetched [`AHEAD`] groups early.
pub(super) fn grow_all<T: Copy>(
    samples: &mut [Sample],
    ends: &[u32],
    points: &[T],
    field: impl Fn(&mut Sample) -> &mut Vec<T>,
) {
    let n = samples.len().min(ends.len());
    let mut start = 0;
    for g in 0..n {
        let ahead = g + AHEAD;
        if ahead < n && ends[ahead - 1] < ends[ahead] {
            prefetch(field(&mut samples[ahead]).as_ptr());
        }
        let end = ends[g];
        if start < end {
            grow(
                field(&mut samples[g]),
                &points[start as usize..end as usize],
            );
        }
        start = end;
    }
}

/// Orders the points set aside, `staged`, group by group into `out`,
/// keeping their order within a group; `pos[g]` is then where group `g`'s
/// points end (and `g + 1`'s start).
pub(super) fn by_group<T: Copy + Default>(
    staged: &[(u32, T)],
    groups: usize,
    pos: &mut Vec<u32>,
    out: &mut Vec<T>,
) {
    out.clear();
    pos.clear();
    if staged.is_empty() {
        return;
    }
    pos.resize(groups, 0);
    for &(g, _) in staged {
        pos[g as usize] += 1;
    }
    let mut sum = 0;
    for p in pos.iter_mut() {
        let n = *p;
        *p = sum;
        sum += n;
    }
    out.resize(staged.len(), T::default());
    for &(g, x) in staged {
        let at = &mut pos[g as usize];
        out[*at as usize] = x;
        *at += 1;
    }
}

/// `to.extend_from_slice(from)`; samples mostly hold one point: those skip
/// the call to `memcpy`.
#[inline]
fn push<T: Copy>(to: &mut Vec<T>, from: &[T]) {
    match from {
        [] => {}
        [x] => to.push(*x),
        _ => to.extend_from_slice(from),
    }
}

/// Appends the points `from` of group `g` to `to`; samples mostly hold one
/// point: those skip the loop.
#[inline]
pub(super) fn stage<T: Copy>(to: &mut Vec<(u32, T)>, g: u32, from: &[T]) {
    match from {
        [] => {}
        [x] => to.push((g, *x)),
        _ => to.extend(from.iter().map(|&x| (g, x))),
    }
}

/// Appends `more` to `v`: in place when it fits (prost leaves decoded
/// vectors room for four points), else in one new allocation of the final
/// size (cheaper than growing the old one, which copies anyway).
fn grow<T: Copy>(v: &mut Vec<T>, more: &[T]) {
    if v.capacity() - v.len() >= more.len() {
        push(v, more);
        return;
    }
    let mut out = Vec::with_capacity(v.len() + more.len());
    push(&mut out, v);
    push(&mut out, more);
    *v = out;
}
