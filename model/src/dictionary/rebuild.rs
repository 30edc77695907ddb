//! Interning one dictionary's live entries into a builder, bottom up, so that
//! entries equal by value (recursively) get one index. Shared by `dedup` and
//! `merge`.

use crate::proto::{ProfilesDictionary, ZeroEntry};

use super::{visit, DictionaryBuilder, Live, Remap, TableRemap};

/// Moves the live entries of `dict` into `b` in their old order, rewriting
/// their references first, and returns where each old index went. Entries
/// are visited in old index order, so a new index never exceeds the old one
/// when `b` starts empty (the encoding cannot grow).
pub(crate) fn intern_live(
    b: &mut DictionaryBuilder,
    dict: ProfilesDictionary,
    live: &Live,
) -> Remap {
    let mut r = Remap::identity();
    r.strings = intern_table(dict.string_table, &live.strings, |s| b.strings.intern(s));
    r.attributes = intern_table(dict.attribute_table, &live.attributes, |mut a| {
        visit::attribute_mut(&mut a, &mut |t, i| *i = r.map(t, *i));
        b.attributes.intern(a)
    });
    r.mappings = intern_table(dict.mapping_table, &live.mappings, |mut m| {
        visit::mapping_mut(&mut m, &mut |t, i| *i = r.map(t, *i));
        b.mappings.intern(m)
    });
    r.functions = intern_table(dict.function_table, &live.functions, |mut f| {
        visit::function_mut(&mut f, &mut |t, i| *i = r.map(t, *i));
        b.functions.intern(f)
    });
    r.locations = intern_table(dict.location_table, &live.locations, |mut l| {
        visit::location_mut(&mut l, &mut |t, i| *i = r.map(t, *i));
        b.locations.intern(l)
    });
    r.stacks = intern_table(dict.stack_table, &live.stacks, |mut s| {
        visit::stack_mut(&mut s, &mut |t, i| *i = r.map(t, *i));
        b.stacks.intern(s)
    });
    r.links = intern_table(dict.link_table, &live.links, |l| b.links.intern(l));
    r
}

/// A zero entry written otherwise than the default (pdata's attribute with
/// an empty `value`, a link of zero ids) is interned as the default, found
/// at the builder's index 0, not as a new entry that every reference to it
/// would move to.
fn intern_table<T: ZeroEntry + Default>(
    values: Vec<T>,
    live: &[bool],
    mut intern: impl FnMut(T) -> i32,
) -> TableRemap {
    let mut map = vec![0; values.len()];
    for ((v, &keep), slot) in values.into_iter().zip(live).zip(&mut map) {
        if keep {
            *slot = intern(if v.is_zero() { T::default() } else { v });
        }
    }
    TableRemap::from_vec(map)
}
