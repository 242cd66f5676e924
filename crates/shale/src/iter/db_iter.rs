//! `DbIter`: the user's view of a merged internal iterator at one snapshot.
//!
//! Below it, every version of every key from every source, newest first per user key.
//! It shows, for each user key, only the newest version with `seq <= snapshot`, and only if
//! that version is a put; it honours lower (inclusive) and upper (exclusive) bounds.
//!
//! Forward, the inner iterator sits on the entry being shown. Backward, it sits *before*
//! all entries of the key being shown (internal order puts newer versions first, so walking
//! back meets a key's versions oldest first, and only after leaving the key is its newest
//! visible version known); key and value are then copies. The scheme is LevelDB's
//! `db/db_iter.cc`.

use std::cell::Cell;
use std::cmp::Ordering;
use std::sync::Arc;

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, InternalKey, ParsedKey, SeqNo, ValueKind};
use crate::range_del::RangeDels;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over user keys and values at a snapshot.
pub struct DbIter<I> {
    inner: I,
    snapshot: SeqNo,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Reverse: the key and value shown. Forward: scratch for the key being skipped.
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    /// The range tombstones of every source; a put they cover reads as a delete.
    range_dels: Option<Arc<RangeDels>>,
    /// The fragment of `range_dels` the last key looked up fell in: keys come in order.
    range_hint: Cell<usize>,
}

fn parse(ikey: &[u8]) -> Result<ParsedKey<'_>> {
    parse_internal_key(ikey).ok_or_else(|| {
        Error::corruption(
            "<iterator>",
            0,
            format!("malformed internal key {:02x?}", ikey),
        )
    })
}

impl<I: InternalIterator> DbIter<I> {
    /// Bounds are user keys: `lower` inclusive, `upper` exclusive.
    pub fn new(inner: I, snapshot: SeqNo, lower: Option<Vec<u8>>, upper: Option<Vec<u8>>) -> Self {
        DbIter {
            inner,
            snapshot,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            range_dels: None,
            range_hint: Cell::new(0),
        }
    }

    /// Hide the entries that the range tombstones in `set` delete.
    pub fn with_range_dels(mut self, set: Option<Arc<RangeDels>>) -> Self {
        self.range_dels = set.filter(|s| !s.is_empty());
        self
    }

    /// What `entry` says about its key at the snapshot: a put under a newer range
    /// tombstone reads as a delete.
    fn kind_of(&self, entry: &ParsedKey<'_>) -> ValueKind {
        let range_deleted = || {
            let Some(set) = self.range_dels.as_deref() else {
                return false;
            };
            let mut hint = self.range_hint.get();
            let deleted = set.deletes_near(&mut hint, entry.user_key, entry.seq, self.snapshot);
            self.range_hint.set(hint);
            deleted
        };
        match entry.kind {
            ValueKind::Put if !range_deleted() => ValueKind::Put,
            _ => ValueKind::Delete,
        }
    }

    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        match self.direction {
            Direction::Forward => crate::key::user_key(self.inner.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        match self.direction {
            Direction::Forward => self.inner.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    fn above_upper(&self, user_key: &[u8]) -> bool {
        self.upper.as_deref().is_some_and(|u| user_key >= u)
    }

    fn below_lower(&self, user_key: &[u8]) -> bool {
        self.lower.as_deref().is_some_and(|l| user_key < l)
    }

    /// Run one move; if it fails, leave the cursor invalid. A failed move can leave the
    /// merged sources half moved (some past the key shown, one not repositioned at all),
    /// so going on from there could skip keys without another error. A seek starts over.
    fn guarded(&mut self, step: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let moved = step(self);
        if moved.is_err() {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
        }
        moved
    }

    pub fn seek_to_first(&mut self) -> Result<()> {
        self.guarded(|it| match it.lower.clone() {
            Some(lower) => it.seek_inner(&lower),
            None => {
                it.direction = Direction::Forward;
                it.inner.seek_to_first()?;
                it.find_next_user_entry(false)
            }
        })
    }

    /// Move to the first key `>= target` (and `>= lower`).
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|it| it.seek_inner(target))
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        let target = match &self.lower {
            Some(l) if target < l.as_slice() => l.clone(),
            _ => target.to_vec(),
        };
        self.direction = Direction::Forward;
        let ikey = InternalKey::new(&target, self.snapshot, ValueKind::SEEK);
        self.inner.seek(ikey.encoded())?;
        self.find_next_user_entry(false)
    }

    pub fn seek_to_last(&mut self) -> Result<()> {
        self.guarded(Self::seek_to_last_inner)
    }

    fn seek_to_last_inner(&mut self) -> Result<()> {
        self.direction = Direction::Reverse;
        match self.upper.clone() {
            Some(upper) => {
                let ikey = InternalKey::new(&upper, SeqNo::MAX, ValueKind::SEEK);
                self.inner.seek(ikey.encoded())?;
                if self.inner.valid() {
                    self.inner.prev()?;
                } else {
                    self.inner.seek_to_last()?;
                }
            }
            None => self.inner.seek_to_last()?,
        }
        self.find_prev_user_entry()
    }

    /// Move to the last key `<= target` (and `< upper`).
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|it| it.seek_for_prev_inner(target))
    }

    fn seek_for_prev_inner(&mut self, target: &[u8]) -> Result<()> {
        if self.above_upper(target) {
            // The answer is the last key below the bound: seek there rather than step
            // back over every entry between the bound and `target`.
            return self.seek_to_last_inner();
        }
        self.direction = Direction::Reverse;
        // The first entry after every version of `target`.
        let ikey = InternalKey::new(target, SeqNo::ZERO, ValueKind::Delete);
        self.inner.seek(ikey.encoded())?;
        if self.inner.valid() {
            let at = parse(self.inner.key())?;
            if at.user_key == target && at.seq == SeqNo::ZERO {
                self.inner.next()?;
            }
        }
        if self.inner.valid() {
            self.inner.prev()?;
        } else {
            self.inner.seek_to_last()?;
        }
        // Skip keys at or past the upper bound.
        while self.inner.valid() && self.above_upper(parse(self.inner.key())?.user_key) {
            self.inner.prev()?;
        }
        self.find_prev_user_entry()
    }

    #[allow(
        clippy::should_implement_trait,
        reason = "a cursor, like RocksDB's raw iterator: next() moves it and yields nothing"
    )]
    pub fn next(&mut self) -> Result<()> {
        self.guarded(Self::next_inner)
    }

    pub fn prev(&mut self) -> Result<()> {
        self.guarded(Self::prev_inner)
    }

    fn next_inner(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        if self.direction == Direction::Reverse {
            // The inner iterator sits before every entry of saved_key; step onto them.
            self.direction = Direction::Forward;
            if self.inner.valid() {
                self.inner.next()?;
            } else {
                self.inner.seek_to_first()?;
            }
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(crate::key::user_key(self.inner.key()));
            self.inner.next()?;
        }
        // Skip the remaining (older) versions of saved_key.
        self.find_next_user_entry(true)
    }

    fn prev_inner(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        if self.direction == Direction::Forward {
            // Walk back to before every entry of the current key.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(crate::key::user_key(self.inner.key()));
            loop {
                self.inner.prev()?;
                if !self.inner.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    return Ok(());
                }
                if parse(self.inner.key())?.user_key < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry()
    }

    /// Forward: from the inner position, find the first visible put, skipping entries of
    /// `saved_key` if `skipping`.
    fn find_next_user_entry(&mut self, mut skipping: bool) -> Result<()> {
        while self.inner.valid() {
            let entry = parse(self.inner.key())?;
            if self.above_upper(entry.user_key) {
                break;
            }
            if entry.seq <= self.snapshot {
                let shadowed = skipping && entry.user_key.cmp(&self.saved_key) != Ordering::Greater;
                if !shadowed {
                    match self.kind_of(&entry) {
                        ValueKind::Delete | ValueKind::RangeDelete => {
                            // Hide this key's older versions.
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(entry.user_key);
                            skipping = true;
                        }
                        ValueKind::Put => {
                            self.valid = true;
                            return Ok(());
                        }
                    }
                }
            }
            self.inner.next()?;
        }
        self.valid = false;
        Ok(())
    }

    /// Backward: from the inner position, find the previous key whose newest visible
    /// version is a put; leave the inner iterator before all of that key's entries.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        let mut kind = ValueKind::Delete;
        while self.inner.valid() {
            let entry = parse(self.inner.key())?;
            if self.below_lower(entry.user_key) {
                break;
            }
            if entry.seq <= self.snapshot {
                if kind != ValueKind::Delete && entry.user_key < self.saved_key.as_slice() {
                    // Left the key being assembled: it is the answer.
                    break;
                }
                kind = self.kind_of(&entry);
                self.saved_key.clear();
                self.saved_key.extend_from_slice(entry.user_key);
                self.saved_value.clear();
                if kind == ValueKind::Put {
                    self.saved_value.extend_from_slice(self.inner.value());
                }
            }
            self.inner.prev()?;
        }
        if kind == ValueKind::Delete {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
        } else {
            self.valid = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::iter::VecIter;

    /// Entries (key, seq, Some(value) | None for delete) -> a sorted VecIter.
    fn source(entries: &[(u8, u64, Option<u8>)]) -> VecIter {
        let list: Vec<([u8; 1], u64, Option<[u8; 1]>)> = entries
            .iter()
            .map(|&(k, s, v)| ([k], s, v.map(|v| [v])))
            .collect();
        VecIter::from_versions(&list)
    }

    /// What a user should see at `snapshot` within bounds.
    fn expected(
        entries: &[(u8, u64, Option<u8>)],
        snapshot: u64,
        lower: Option<u8>,
        upper: Option<u8>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut newest: BTreeMap<u8, (u64, Option<u8>)> = BTreeMap::new();
        for &(k, s, v) in entries {
            if s <= snapshot && newest.get(&k).is_none_or(|&(s0, _)| s > s0) {
                newest.insert(k, (s, v));
            }
        }
        newest
            .into_iter()
            .filter(|&(k, _)| lower.is_none_or(|l| k >= l) && upper.is_none_or(|u| k < u))
            .filter_map(|(k, (_, v))| v.map(|v| (vec![k], vec![v])))
            .collect()
    }

    /// A source whose `fail_at`-th move (counting `next` and `prev`) fails; with
    /// `fail_at: 0`, one that only counts them.
    struct Failing {
        inner: VecIter,
        moves: usize,
        fail_at: usize,
    }

    impl Failing {
        fn step(&mut self, forward: bool) -> Result<()> {
            self.moves += 1;
            if self.moves == self.fail_at {
                return Err(Error::corruption("<test>", 0, "injected".to_owned()));
            }
            if forward {
                self.inner.next()
            } else {
                self.inner.prev()
            }
        }
    }

    impl InternalIterator for Failing {
        fn valid(&self) -> bool {
            self.inner.valid()
        }
        fn seek_to_first(&mut self) -> Result<()> {
            self.inner.seek_to_first()
        }
        fn seek_to_last(&mut self) -> Result<()> {
            self.inner.seek_to_last()
        }
        fn seek(&mut self, target: &[u8]) -> Result<()> {
            self.inner.seek(target)
        }
        fn next(&mut self) -> Result<()> {
            self.step(true)
        }
        fn prev(&mut self) -> Result<()> {
            self.step(false)
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
    }

    #[test]
    fn a_failed_move_leaves_the_cursor_invalid_until_a_seek() {
        let entries = [(1, 1, Some(10)), (2, 2, Some(20)), (3, 3, Some(30))];
        for fail_at in 1..=4 {
            let inner = Failing {
                inner: source(&entries),
                moves: 0,
                fail_at,
            };
            let mut it = DbIter::new(inner, SeqNo(9), None, None);
            it.seek_to_first().unwrap();
            let mut moved = Ok(());
            for forward in [true, true, false, false] {
                moved = if forward { it.next() } else { it.prev() };
                if moved.is_err() {
                    break;
                }
            }
            assert!(moved.is_err(), "move {fail_at} should fail");
            assert!(!it.valid(), "invalid after the failed move {fail_at}");
            // Moving on does nothing; a seek starts over.
            it.next().unwrap();
            assert!(!it.valid());
            it.seek(&[2]).unwrap();
            assert_eq!((it.key(), it.value()), (&[2u8][..], &[20u8][..]));
        }
    }

    #[test]
    fn seek_for_prev_past_the_upper_bound_lands_below_it() {
        let entries: Vec<_> = (0..200u8).map(|k| (k, 1, Some(k))).collect();
        // Counting the source's moves (`fail_at: 0` never fails).
        let counted = Failing {
            inner: source(&entries),
            moves: 0,
            fail_at: 0,
        };
        let mut it = DbIter::new(counted, SeqNo(9), None, Some(vec![50]));
        it.seek_for_prev(&[199]).unwrap();
        assert_eq!(it.key(), &[49]);
        // It sought the bound, not stepped back from 199 over the 149 keys past it.
        assert!(it.inner.moves < 5, "{} moves", it.inner.moves);
        it.seek_for_prev(&[50]).unwrap();
        assert_eq!(it.key(), &[49]);
        it.seek_for_prev(&[20]).unwrap();
        assert_eq!(it.key(), &[20]);
    }

    proptest! {
        #[test]
        fn forward_and_backward_match_the_model(
            raw in proptest::collection::btree_map((0u8..30, 1u64..40), proptest::option::of(any::<u8>()), 0..80),
            snapshot in 0u64..45,
            lower in proptest::option::of(0u8..30),
            upper in proptest::option::of(0u8..32),
            flips in proptest::collection::vec(any::<bool>(), 0..30),
        ) {
            let entries: Vec<(u8, u64, Option<u8>)> = raw.into_iter().map(|((k, s), v)| (k, s, v)).collect();
            let want = expected(&entries, snapshot, lower, upper);
            let mk = || DbIter::new(source(&entries), SeqNo(snapshot), lower.map(|l| vec![l]), upper.map(|u| vec![u]));

            let mut it = mk();
            it.seek_to_first().unwrap();
            let mut got = Vec::new();
            while it.valid() { got.push((it.key().to_vec(), it.value().to_vec())); it.next().unwrap(); }
            prop_assert_eq!(&got, &want);

            let mut it = mk();
            it.seek_to_last().unwrap();
            let mut back = Vec::new();
            while it.valid() { back.push((it.key().to_vec(), it.value().to_vec())); it.prev().unwrap(); }
            back.reverse();
            prop_assert_eq!(&back, &want);

            // Random direction changes follow the model's positions.
            if !want.is_empty() {
                let mut it = mk();
                it.seek_to_first().unwrap();
                let mut pos = 0usize;
                for f in flips {
                    if f && pos + 1 < want.len() { it.next().unwrap(); pos += 1; }
                    else if !f && pos > 0 { it.prev().unwrap(); pos -= 1; }
                    prop_assert!(it.valid());
                    prop_assert_eq!(it.key(), want[pos].0.as_slice());
                    prop_assert_eq!(it.value(), want[pos].1.as_slice());
                }
            }

            // seek and seek_for_prev land on the right keys.
            for t in 0u8..32 {
                let mut it = mk();
                it.seek(&[t]).unwrap();
                let first = want.iter().find(|(k, _)| k[0] >= t);
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), first.map(|(k, _)| k.clone()));
                let mut it = mk();
                it.seek_for_prev(&[t]).unwrap();
                let last = want.iter().rev().find(|(k, _)| k[0] <= t);
                prop_assert_eq!(it.valid().then(|| it.key().to_vec()), last.map(|(k, _)| k.clone()));
            }
        }
    }
}
