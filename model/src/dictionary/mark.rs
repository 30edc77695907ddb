use crate::proto::{ProfilesData, ProfilesDictionary, ResourceProfiles, Sample};

use super::{visit, GcOptions, PerTable, Table};
use profcol_prefetch::{ahead, prefetch_slice};

/// Which dictionary entries are reachable from the data, one flag per entry.
/// Index 0 of a non-empty table is always live: it is the null value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Live {
    pub strings: Vec<bool>,
    pub mappings: Vec<bool>,
    pub locations: Vec<bool>,
    pub functions: Vec<bool>,
    pub links: Vec<bool>,
    pub attributes: Vec<bool>,
    pub stacks: Vec<bool>,
}

impl Live {
    /// Only the null entry (index 0) of each table live.
    pub(crate) fn sized(lens: PerTable) -> Self {
        let flags = |n: usize| {
            let mut v = vec![false; n];
            if let Some(z) = v.first_mut() {
                *z = true;
            }
            v
        };
        Self {
            strings: flags(lens.strings),
            mappings: flags(lens.mappings),
            locations: flags(lens.locations),
            functions: flags(lens.functions),
            links: flags(lens.links),
            attributes: flags(lens.attributes),
            stacks: flags(lens.stacks),
        }
    }

    pub fn table(&self, t: Table) -> &[bool] {
        match t {
            Table::String => &self.strings,
            Table::Mapping => &self.mappings,
            Table::Location => &self.locations,
            Table::Function => &self.functions,
            Table::Link => &self.links,
            Table::Attribute => &self.attributes,
            Table::Stack => &self.stacks,
        }
    }

    fn table_mut(&mut self, t: Table) -> &mut Vec<bool> {
        match t {
            Table::String => &mut self.strings,
            Table::Mapping => &mut self.mappings,
            Table::Location => &mut self.locations,
            Table::Function => &mut self.functions,
            Table::Link => &mut self.links,
            Table::Attribute => &mut self.attributes,
            Table::Stack => &mut self.stacks,
        }
    }

    #[inline]
    pub(crate) fn set(&mut self, t: Table, i: i32) {
        if let Some(flag) = usize::try_from(i)
            .ok()
            .and_then(|i| self.table_mut(t).get_mut(i))
        {
            *flag = true;
        }
    }

    /// Every entry of tables of these sizes live.
    pub fn all(lens: PerTable) -> Self {
        Self {
            strings: vec![true; lens.strings],
            mappings: vec![true; lens.mappings],
            locations: vec![true; lens.locations],
            functions: vec![true; lens.functions],
            links: vec![true; lens.links],
            attributes: vec![true; lens.attributes],
            stacks: vec![true; lens.stacks],
        }
    }

    /// Live entries per table.
    pub fn counts(&self) -> PerTable {
        let n = |v: &[bool]| v.iter().filter(|&&b| b).count();
        PerTable {
            strings: n(&self.strings),
            mappings: n(&self.mappings),
            locations: n(&self.locations),
            functions: n(&self.functions),
            links: n(&self.links),
            attributes: n(&self.attributes),
            stacks: n(&self.stacks),
        }
    }

    /// True when every entry of every table is live.
    pub fn all_live(&self) -> bool {
        Table::ALL.iter().all(|&t| self.table(t).iter().all(|&b| b))
    }
}

/// What some samples refer to, marked by a pass that had them at hand, so
/// that the collection after it need not visit them again
/// ([`super::GcOptions::premarked`]): one flag per entry of the stack, link
/// and attribute tables.
#[derive(Clone, Debug, Default)]
pub struct SampleMarks {
    stacks: Vec<bool>,
    links: Vec<bool>,
    attributes: Vec<bool>,
    /// References past the tables as they were sized: a table may grow
    /// between the marking and the collection.
    beyond: Vec<(Table, i32)>,
}

impl SampleMarks {
    /// No marks, for tables of these sizes.
    pub fn reset(&mut self, stacks: usize, links: usize, attributes: usize) {
        for (v, n) in [
            (&mut self.stacks, stacks),
            (&mut self.links, links),
            (&mut self.attributes, attributes),
        ] {
            v.clear();
            v.resize(n, false);
        }
        self.beyond.clear();
    }

    /// Adds the marks of `other`, made for tables no larger.
    pub fn add(&mut self, other: &SampleMarks) {
        other.or_into([&mut self.stacks, &mut self.links, &mut self.attributes]);
        self.beyond.extend_from_slice(&other.beyond);
    }

    /// Sets in `to` (stack, link and attribute flags) the flags set here.
    fn or_into(&self, to: [&mut Vec<bool>; 3]) {
        let [stacks, links, attributes] = to;
        for (to, from) in [
            (stacks, &self.stacks),
            (links, &self.links),
            (attributes, &self.attributes),
        ] {
            to.iter_mut().zip(from).for_each(|(t, &m)| *t |= m);
        }
    }

    /// Marks what `s` refers to: the sample fields [`visit::resources`]
    /// visits, listed here again because this runs once per sample.
    #[inline(always)]
    pub fn sample(&mut self, s: &Sample) {
        let beyond = &mut self.beyond;
        note(&mut self.stacks, Table::Stack, s.stack_index, beyond);
        note(&mut self.links, Table::Link, s.link_index, beyond);
        for &a in &s.attribute_indices {
            note(&mut self.attributes, Table::Attribute, a, beyond);
        }
    }

    fn add_to(&self, live: &mut Live) {
        self.or_into([&mut live.stacks, &mut live.links, &mut live.attributes]);
        for &(t, i) in &self.beyond {
            live.set(t, i);
        }
    }
}

#[inline]
fn note(flags: &mut [bool], t: Table, i: i32, beyond: &mut Vec<(Table, i32)>) {
    let Ok(at) = usize::try_from(i) else {
        // A negative index marks nothing, as in `mark`.
        return;
    };
    match flags.get_mut(at) {
        Some(f) => *f = true,
        None => beyond.push((t, i)),
    }
}

/// Marks the entries reachable from samples, profiles and resource/scope
/// attributes, then follows the dictionary's own references top down
/// (stacks, locations, mappings, functions, attributes; strings last), so
/// each table is scanned once.
pub fn mark(data: &ProfilesData) -> Live {
    match &data.dictionary {
        Some(d) => mark_parts(d, &data.resource_profiles),
        None => Live::default(),
    }
}

pub fn mark_parts(dict: &ProfilesDictionary, resources: &[ResourceProfiles]) -> Live {
    mark_with(dict, resources, &GcOptions::default())
}

/// [`mark_parts`] as [`GcOptions`] say.
pub(crate) fn mark_with(
    dict: &ProfilesDictionary,
    resources: &[ResourceProfiles],
    opts: &GcOptions<'_>,
) -> Live {
    let mut live = Live::sized(PerTable::lens(dict));
    let (marks, marked) = match opts.premarked {
        Some((marks, marked)) => (Some(marks), marked),
        None => (None, &[][..]),
    };
    let mut marked = marked.iter();
    visit::resources_with(resources, &mut |t, &i| live.set(t, i), &mut || {
        !marked.next().copied().unwrap_or(false)
    });
    if let Some(marks) = marks {
        marks.add_to(&mut live);
    }

    if opts.whole_below_live_stacks && live.stacks.iter().all(|&l| l) {
        for t in [Table::Location, Table::Mapping, Table::Function] {
            live.table_mut(t).fill(true);
        }
        close_below_stacks(dict, &mut live);
    } else {
        close(dict, &mut live);
    }
    live
}

/// Marks what the live entries of `dict` refer to, top down (stacks,
/// locations, mappings, functions, attributes; strings last), so each
/// table is scanned once.
pub(crate) fn close(dict: &ProfilesDictionary, live: &mut Live) {
    let stacks = &dict.stack_table;
    for (i, s) in stacks.iter().enumerate() {
        if let Some(next) = ahead(stacks, i) {
            prefetch_slice(&next.location_indices);
        }
        if live.stacks[i] {
            visit::stack(s, &mut |t, j| live.set(t, *j));
        }
    }
    close_below_stacks(dict, live);
}

fn close_below_stacks(dict: &ProfilesDictionary, live: &mut Live) {
    for (i, l) in dict.location_table.iter().enumerate() {
        if live.locations[i] {
            visit::location(l, &mut |t, j| live.set(t, *j));
        }
    }
    for (i, m) in dict.mapping_table.iter().enumerate() {
        if live.mappings[i] {
            visit::mapping(m, &mut |t, j| live.set(t, *j));
        }
    }
    for (i, x) in dict.function_table.iter().enumerate() {
        if live.functions[i] {
            visit::function(x, &mut |t, j| live.set(t, *j));
        }
    }
    for (i, a) in dict.attribute_table.iter().enumerate() {
        if live.attributes[i] {
            visit::attribute(a, &mut |t, j| live.set(t, *j));
        }
    }
}
