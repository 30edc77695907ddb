//! Finding each sample's group: the slots of its stack, then hash tables.

use hashbrown::HashTable;

use profcol_model::dictionary::{mix64, samples_identity, SampleIdentity};
use profcol_model::proto::Sample;

use super::identity::Key;
use super::NONE;

/// Identities held per stack before the hash table: most stacks are seen
/// with a few thread names and links. Eight fill one cache line, and on the
/// benches' request (many threads and links per stack) send a good deal
/// fewer samples to the slower hash table than four, most of all under
/// dictionary_dedup, which sees every link and attribute set.
const SLOTS: usize = 8;

/// The slots of one stack: (rest code, group), group NONE when unused,
/// filled in order; aligned so that a lookup touches one line.
#[derive(Clone, Copy)]
#[repr(align(64))]
pub(super) struct Slots([(u32, u32); SLOTS]);

impl Slots {
    const EMPTY: Slots = Slots([(0, NONE); SLOTS]);
}

/// Finds each sample's group: groups are numbered in the order of their
/// first samples.
#[derive(Default)]
pub(super) struct Groups {
    /// How many groups there are.
    pub(super) count: u32,
    /// The first [`SLOTS`] coded identities seen with each stack.
    pub(super) heads: Vec<Slots>,
    /// Stacks whose slots are set, to clear them afterwards.
    touched: Vec<u32>,
    /// Other coded identities: (stack << 32 | code) -> group.
    coded: HashTable<(u64, u32)>,
    /// Identities that cannot be coded -> (group, where the first sample's
    /// attributes are in `attrs`).
    table: HashTable<(Key, u32, u32, u32)>,
    /// The attribute lists of the first samples of groups with more than two
    /// attributes, compared as sets.
    attrs: Vec<i32>,
}

impl Groups {
    /// Readies the groups for a profile whose stacks below `stacks` take
    /// the slots (0: none does).
    pub(super) fn start(&mut self, stacks: usize) {
        self.count = 0;
        self.coded.clear();
        self.table.clear();
        self.attrs.clear();
        if self.heads.len() < stacks {
            self.heads.resize(stacks, Slots::EMPTY);
        }
    }

    /// Empties the slots the profile set, for the next one.
    pub(super) fn finish(&mut self) {
        for &st in &self.touched {
            self.heads[st as usize] = Slots::EMPTY;
        }
        self.touched.clear();
    }

    #[inline]
    pub(super) fn new_group(&mut self) -> u32 {
        self.count += 1;
        self.count - 1
    }

    /// The group of a sample of stack `st` whose rest is coded `code`, and
    /// whether it is new: no earlier sample has its identity and shape.
    /// Exact: the code is the identity with the stack.
    #[inline]
    pub(super) fn coded(&mut self, st: u32, code: u32) -> (u32, bool) {
        let next = self.count;
        // Slots fill in order: the first free one ends the search.
        for (i, w) in self.heads[st as usize].0.iter_mut().enumerate() {
            if w.1 == NONE {
                *w = (code, next);
                if i == 0 {
                    self.touched.push(st);
                }
                return (self.new_group(), true);
            }
            if w.0 == code {
                return (w.1, false);
            }
        }
        let key = (u64::from(st) << 32) | u64::from(code);
        let h = mix64(key);
        if let Some(&(_, g)) = self.coded.find(h, |&(other, _)| other == key) {
            return (g, false);
        }
        self.coded.insert_unique(h, (key, next), |&(k, _)| mix64(k));
        (self.new_group(), true)
    }

    /// [`Self::coded`] for a sample whose identity cannot be coded, through
    /// the hash table; `s` is rewritten.
    pub(super) fn slow(&mut self, s: &Sample) -> (u32, bool) {
        let key = Key::of(s);
        let h = key.hash();
        let attrs = &self.attrs;
        let found = self.table.find(h, |(other, _, at, len)| {
            *other == key
                && (key.exact()
                    || samples_identity(s)
                        == SampleIdentity {
                            stack_index: key.stack,
                            attribute_indices: &attrs[*at as usize..(*at + *len) as usize],
                            link_index: key.rest.link,
                        })
        });
        if let Some(&(_, g, _, _)) = found {
            return (g, false);
        }
        let (at, len) = if key.exact() {
            (0, 0)
        } else {
            let at = self.attrs.len() as u32;
            self.attrs.extend_from_slice(&s.attribute_indices);
            (at, s.attribute_indices.len() as u32)
        };
        let g = self.new_group();
        self.table
            .insert_unique(h, (key, g, at, len), |(k, ..)| k.hash());
        (g, true)
    }
}
