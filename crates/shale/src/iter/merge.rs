//! `MergingIter`: one sorted view over several sorted children.
//!
//! Every child is an [`InternalIterator`]; the merge yields the union of their entries in
//! internal-key order (duplicates, which cannot occur between distinct sources because
//! sequence numbers are unique, would come out once per child). It does not hide anything:
//! shadowed versions and tombstones are the job of the DB iterator above it.
//!
//! Direction: moving forward, every child is positioned at its first entry `> key()` (the
//! current child at `key()` itself); moving backward, at its last entry `< key()`. Changing
//! direction re-positions the other children, as LevelDB's `table/merger.cc` does:
//!
//! ```text
//!  forward:   child A  ..[k]..      all children sit at or after key()
//!             child B  ....[>k]..
//!  prev():    child B seeks k, steps back -> sits at its last entry < k
//! ```
//!
//! The current child is found by a linear scan: cheap for the handful of sources a read
//! merges; a heap would pay off only with many more children.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key::compare_internal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// The sorted union of several iterators.
pub struct MergingIter<I> {
    children: Vec<I>,
    current: Option<usize>,
    direction: Direction,
}

impl<I: InternalIterator> MergingIter<I> {
    pub fn new(children: Vec<I>) -> Self {
        MergingIter {
            children,
            current: None,
            direction: Direction::Forward,
        }
    }

    fn find_smallest(&mut self) {
        self.current = self.pick(Ordering::Less);
    }

    fn find_largest(&mut self) {
        self.current = self.pick(Ordering::Greater);
    }

    /// The valid child whose key is the most `wanted` (Less: smallest, Greater: largest).
    fn pick(&self, wanted: Ordering) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                continue;
            }
            best = match best.and_then(|b| self.children.get(b).map(|c| (b, c))) {
                Some((b, c)) if compare_internal(child.key(), c.key()) != wanted => Some(b),
                _ => Some(i),
            };
        }
        best
    }

    fn current_child(&self) -> Option<&I> {
        self.current.and_then(|i| self.children.get(i))
    }
}

impl<I: InternalIterator> InternalIterator for MergingIter<I> {
    fn valid(&self) -> bool {
        self.current_child().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        for child in &mut self.children {
            child.seek_to_first()?;
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        for child in &mut self.children {
            child.seek_to_last()?;
        }
        self.direction = Direction::Reverse;
        self.find_largest();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        for child in &mut self.children {
            child.seek(target)?;
        }
        self.direction = Direction::Forward;
        self.find_smallest();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction == Direction::Reverse {
            // Every other child sits before key(): move each to its first entry > key().
            let key = self.key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek(&key)?;
                if child.valid() && compare_internal(&key, child.key()) == Ordering::Equal {
                    child.next()?;
                }
            }
            self.direction = Direction::Forward;
        }
        if let Some(child) = self.children.get_mut(cur) {
            child.next()?;
        }
        self.find_smallest();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let Some(cur) = self.current else {
            return Ok(());
        };
        if self.direction == Direction::Forward {
            // Every other child sits after key(): move each to its last entry < key().
            let key = self.key().to_vec();
            for (i, child) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                child.seek(&key)?;
                if child.valid() {
                    child.prev()?;
                } else {
                    child.seek_to_last()?;
                }
            }
            self.direction = Direction::Reverse;
        }
        if let Some(child) = self.children.get_mut(cur) {
            child.prev()?;
        }
        self.find_largest();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current_child().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current_child().map_or(&[], |c| c.value())
    }
}

/// An iterator over a sorted vector of owned entries; used in tests and for small sources.
pub struct VecIter {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

impl VecIter {
    /// `entries` must be sorted by internal key.
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        VecIter { entries, pos: None }
    }

    /// Test input: `(user key, seq, Some(value))` puts and `(user key, seq, None)` deletes,
    /// in any order; they are encoded as internal keys and sorted.
    #[cfg(test)]
    pub(crate) fn from_versions<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        list: &[(K, u64, Option<V>)],
    ) -> Self {
        use crate::key::{InternalKey, SeqNo, ValueKind};
        let mut v: Vec<(Vec<u8>, Vec<u8>)> = list
            .iter()
            .map(|(k, s, val)| {
                let kind = if val.is_some() {
                    ValueKind::Put
                } else {
                    ValueKind::Delete
                };
                let ikey = InternalKey::new(k.as_ref(), SeqNo(*s), kind);
                let value = val.as_ref().map_or(&[][..], AsRef::as_ref).to_vec();
                (ikey.encoded().to_vec(), value)
            })
            .collect();
        v.sort_by(|a, b| compare_internal(&a.0, &b.0));
        VecIter::new(v)
    }
}

impl InternalIterator for VecIter {
    fn valid(&self) -> bool {
        self.pos.is_some_and(|p| p < self.entries.len())
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = Some(0);
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.entries.len().checked_sub(1);
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let i = self
            .entries
            .partition_point(|(k, _)| compare_internal(k, target) == Ordering::Less);
        self.pos = Some(i);
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.pos = self.pos.map(|p| p + 1);
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
        Ok(())
    }
    fn key(&self) -> &[u8] {
        self.pos
            .and_then(|p| self.entries.get(p))
            .map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.pos
            .and_then(|p| self.entries.get(p))
            .map_or(&[], |(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{InternalKey, SeqNo, ValueKind};
    use proptest::prelude::*;

    fn ik(k: u16, seq: u64) -> Vec<u8> {
        InternalKey::new(&k.to_be_bytes(), SeqNo(seq), ValueKind::Put)
            .encoded()
            .to_vec()
    }

    fn split(all: &[Vec<u8>], parts: usize) -> Vec<VecIter> {
        let mut children: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); parts];
        for (i, k) in all.iter().enumerate() {
            children[(i * 7 + k.len()) % parts].push((k.clone(), k.clone()));
        }
        children.into_iter().map(VecIter::new).collect()
    }

    proptest! {
        #[test]
        fn merge_matches_sorted_union(
            keys in proptest::collection::btree_set((0u16..200, 1u64..50), 0..120),
            parts in 1usize..5,
            moves in proptest::collection::vec(0u8..4, 0..60),
        ) {
            let mut all: Vec<Vec<u8>> = keys.iter().map(|&(k, s)| ik(k, s)).collect();
            all.sort_by(|a, b| compare_internal(a, b));
            let mut m = MergingIter::new(split(&all, parts));
            let mut model = VecIter::new(all.iter().map(|k| (k.clone(), k.clone())).collect());
            m.seek_to_first().unwrap();
            model.seek_to_first().unwrap();
            for mv in moves {
                prop_assert_eq!(m.valid(), model.valid());
                if !m.valid() {
                    if mv % 2 == 0 { m.seek_to_first().unwrap(); model.seek_to_first().unwrap(); }
                    else { m.seek_to_last().unwrap(); model.seek_to_last().unwrap(); }
                    continue;
                }
                prop_assert_eq!(m.key(), model.key());
                match mv {
                    0 | 1 => { m.next().unwrap(); model.next().unwrap(); }
                    2 => { m.prev().unwrap(); model.prev().unwrap(); }
                    _ => {
                        let t = ik(100, 25);
                        m.seek(&t).unwrap();
                        model.seek(&t).unwrap();
                    }
                }
            }
        }
    }
}
