//! The string table of a pprof file being written.

use std::borrow::Cow;

use hashbrown::HashTable;

/// Output strings in index order, deduplicated by value. Strings borrowed
/// from the OTLP dictionary are not copied; dictionary indices are remapped
/// through a table so each is hashed at most once.
pub(super) struct StringTable<'a> {
    values: Vec<Cow<'a, str>>,
    index: HashTable<u32>,
    hasher: ahash::RandomState,
    /// OTLP string index -> pprof string index + 1 (0: not seen yet).
    by_dict: Vec<u32>,
}

impl<'a> StringTable<'a> {
    pub(crate) fn new(dict_len: usize) -> Self {
        // Most of a file's strings come from the dictionary: sizing the
        // index for all of them up front saves rehashing every string
        // each time it grows.
        let mut t = Self {
            values: Vec::new(),
            index: HashTable::with_capacity(dict_len + 16),
            hasher: ahash::RandomState::new(),
            by_dict: vec![0; dict_len],
        };
        t.intern(Cow::Borrowed(""));
        t
    }

    fn hash(&self, s: &str) -> u64 {
        self.hasher.hash_one(s)
    }

    /// Index of `s`, appending it if new.
    pub(crate) fn intern(&mut self, s: Cow<'a, str>) -> i64 {
        let hash = self.hash(&s);
        let values = &self.values;
        if let Some(&i) = self.index.find(hash, |&i| values[i as usize] == s) {
            return i64::from(i);
        }
        let i = self.values.len() as u32;
        self.values.push(s);
        let (values, hasher) = (&self.values, &self.hasher);
        self.index
            .insert_unique(hash, i, |&j| hasher.hash_one(&*values[j as usize]));
        i64::from(i)
    }

    pub(crate) fn borrowed(&mut self, s: &'a str) -> i64 {
        self.intern(Cow::Borrowed(s))
    }

    /// Index of OTLP string `idx` of `table`; `None` if out of range.
    /// Index 0 of an empty table is the zero value `""`.
    pub(crate) fn dict(&mut self, table: &'a [String], idx: i32) -> Option<i64> {
        let Some(&slot) = usize::try_from(idx).ok().and_then(|i| self.by_dict.get(i)) else {
            return (idx == 0 && table.is_empty()).then_some(0);
        };
        if slot != 0 {
            return Some(i64::from(slot - 1));
        }
        let i = self.borrowed(table.get(idx as usize)?);
        self.by_dict[idx as usize] = i as u32 + 1;
        Some(i)
    }

    pub(crate) fn values(&self) -> &[Cow<'a, str>] {
        &self.values
    }
}
