use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::hashing::DictHash;
use crate::proto::ZeroEntry;

/// One hash-consed table: values in insertion order plus an index by value.
///
/// The hash table stores only indices into `values`, so each value is held
/// once and a lookup by a borrowed form (`&str`, a slice) allocates nothing.
#[derive(Clone)]
pub struct Interner<T> {
    values: Vec<T>,
    index: HashTable<u32>,
    hasher: ahash::RandomState,
}

impl<T: DictHash + PartialEq + Default> Interner<T> {
    /// A table holding only the zero value at index 0.
    pub fn new() -> Self {
        Self::with_capacity(1)
    }

    pub fn with_capacity(cap: usize) -> Self {
        let mut t = Self {
            values: Vec::with_capacity(cap.max(1)),
            index: HashTable::with_capacity(cap.max(1)),
            hasher: ahash::RandomState::new(),
        };
        t.intern(T::default());
        t
    }

    /// Takes over an existing table without moving its entries, so indices
    /// into it stay valid. Later duplicates of an entry stay in place but
    /// interning finds the first one. An empty table gets its zero value;
    /// a zero value written otherwise (pdata's) becomes the default, which
    /// interning the zero value finds.
    pub fn from_values(mut values: Vec<T>) -> Self
    where
        T: ZeroEntry,
    {
        if let Some(first) = values.first_mut().filter(|z| z.is_zero()) {
            *first = T::default();
        }
        let mut t = Self {
            values: Vec::new(),
            index: HashTable::with_capacity(values.len().max(1)),
            hasher: ahash::RandomState::new(),
        };
        if values.is_empty() {
            t.intern(T::default());
            return t;
        }
        t.values = values;
        for i in 0..t.values.len() {
            let hash = t.hash_of(&t.values[i]);
            let (values, hasher) = (&t.values, &t.hasher);
            if t.index
                .find(hash, |&j| values[j as usize] == values[i])
                .is_none()
            {
                let i = u32::try_from(i).expect("dictionary table over 2^32 entries");
                t.index.insert_unique(hash, i, |&j| {
                    let mut h = hasher.build_hasher();
                    values[j as usize].dict_hash(&mut h);
                    std::hash::Hasher::finish(&h)
                });
            }
        }
        t
    }

    fn hash_of<Q: DictHash + ?Sized>(&self, q: &Q) -> u64 {
        let mut h = self.hasher.build_hasher();
        q.dict_hash(&mut h);
        std::hash::Hasher::finish(&h)
    }

    /// Index of `value`, appending it if new.
    pub fn intern(&mut self, value: T) -> i32 {
        let hash = self.hash_of(&value);
        let values = &self.values;
        if let Some(&i) = self.index.find(hash, |&i| values[i as usize] == value) {
            return i as i32;
        }
        self.push_new(hash, value)
    }

    /// Index of the value equal to `q`, creating it with `make` only if new.
    pub fn intern_by<Q>(
        &mut self,
        q: &Q,
        eq: impl Fn(&T, &Q) -> bool,
        make: impl FnOnce(&Q) -> T,
    ) -> i32
    where
        Q: DictHash + ?Sized,
    {
        let hash = self.hash_of(q);
        let values = &self.values;
        if let Some(&i) = self.index.find(hash, |&i| eq(&values[i as usize], q)) {
            return i as i32;
        }
        self.push_new(hash, make(q))
    }

    /// Index of `value` if present.
    pub fn get(&self, value: &T) -> Option<i32> {
        let hash = self.hash_of(value);
        self.index
            .find(hash, |&i| &self.values[i as usize] == value)
            .map(|&i| i as i32)
    }

    fn push_new(&mut self, hash: u64, value: T) -> i32 {
        let i = u32::try_from(self.values.len()).expect("dictionary table over 2^32 entries");
        self.values.push(value);
        let (values, hasher) = (&self.values, &self.hasher);
        self.index.insert_unique(hash, i, |&j| {
            let mut h = hasher.build_hasher();
            values[j as usize].dict_hash(&mut h);
            std::hash::Hasher::finish(&h)
        });
        i as i32
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn values(&self) -> &[T] {
        &self.values
    }

    pub fn into_values(self) -> Vec<T> {
        self.values
    }
}

impl<T: DictHash + PartialEq + Default> Default for Interner<T> {
    fn default() -> Self {
        Self::new()
    }
}
