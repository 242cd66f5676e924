//! Internal keys: a user key followed by an 8-byte trailer that packs the sequence number
//! and the kind of entry.
//!
//! ```text
//! internal key = user_key ++ u64_le((seqno << 8) | kind)
//! ```
//!
//! Internal keys order by user key ascending, then by sequence number *descending*, so the
//! newest version of a key comes first and a reader at snapshot `s` stops at the first entry
//! whose sequence number is `<= s`.

use std::cmp::Ordering;

/// A sequence number: the position of a write in the total order of all writes.
/// Only the low 56 bits are usable; the trailer keeps the other 8 for the [`ValueKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SeqNo(pub u64);

impl SeqNo {
    /// The largest sequence number a trailer can hold.
    pub const MAX: SeqNo = SeqNo((1 << 56) - 1);
    pub const ZERO: SeqNo = SeqNo(0);

    pub fn next(self) -> SeqNo {
        SeqNo(self.0 + 1)
    }
}

/// What an entry says about its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// The key was deleted at this sequence number.
    Delete = 0,
    /// The key holds a value from this sequence number on.
    Put = 1,
    /// Every key from this user key up to the entry's value (exclusive) was deleted at this
    /// sequence number (see `range_del.rs`). Written in WAL batches; in memtables and
    /// SSTables range tombstones are kept apart from the point entries, never in a data
    /// block.
    RangeDelete = 2,
}

impl ValueKind {
    /// The kind used when seeking: the largest of the point kinds, so that
    /// `(key, seq, SEEK_KIND)` sorts before every point entry of `key` at `seq`.
    pub const SEEK: ValueKind = ValueKind::Put;

    pub fn from_u8(v: u8) -> Option<ValueKind> {
        match v {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::RangeDelete),
            _ => None,
        }
    }
}

/// Length of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// Pack a sequence number and kind into a trailer value.
pub fn pack_trailer(seq: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seq <= SeqNo::MAX);
    (seq.0 << 8) | kind as u64
}

/// Append the internal key for `(user_key, seq, kind)` to `dst`.
pub fn encode_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    dst.reserve(user_key.len() + TRAILER_LEN);
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// A borrowed, parsed internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
}

/// Split an internal key into its parts; `None` if it is too short or the kind is unknown.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let (user_key, trailer) = ikey.split_at(split);
    let trailer = u64::from_le_bytes(trailer.try_into().ok()?);
    let kind = ValueKind::from_u8((trailer & 0xff) as u8)?;
    Some(ParsedKey {
        user_key,
        seq: SeqNo(trailer >> 8),
        kind,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short to have a trailer,
/// which only happens with corrupt input and is caught by [`parse_internal_key`]).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    let split = ikey.len().saturating_sub(TRAILER_LEN);
    ikey.get(..split).unwrap_or(ikey)
}

fn trailer(ikey: &[u8]) -> u64 {
    let split = ikey.len().saturating_sub(TRAILER_LEN);
    ikey.get(split..)
        .and_then(|t| t.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

/// The total order of internal keys: user key ascending, then trailer descending.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    compare_bytes(user_key(a), user_key(b)).then_with(|| trailer(b).cmp(&trailer(a)))
}

/// Bytewise order, as `a.cmp(b)`. Keys are mostly short, and for them eight bytes at a
/// time in registers beat a call into the C library's `memcmp`, which this is on every
/// seek, merge step and sort; longer keys go to `memcmp`, which is faster there.
#[inline]
pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    const INLINE_MAX: usize = 32;
    let n = a.len().min(b.len());
    if n > INLINE_MAX {
        return a.cmp(b);
    }
    let (a_head, b_head) = (
        a.get(..n).unwrap_or_default(),
        b.get(..n).unwrap_or_default(),
    );
    let mut a_words = a_head.chunks_exact(8);
    let mut b_words = b_head.chunks_exact(8);
    for (x, y) in (&mut a_words).zip(&mut b_words) {
        let x = u64::from_be_bytes(x.try_into().unwrap_or_default());
        let y = u64::from_be_bytes(y.try_into().unwrap_or_default());
        if x != y {
            return x.cmp(&y);
        }
    }
    // Both remainders have `n % 8` bytes: zero padding keeps their order.
    let tail = |rest: &[u8]| {
        let mut word = [0u8; 8];
        if let Some(head) = word.get_mut(..rest.len()) {
            head.copy_from_slice(rest);
        }
        u64::from_be_bytes(word)
    };
    tail(a_words.remainder())
        .cmp(&tail(b_words.remainder()))
        .then(a.len().cmp(&b.len()))
}

/// An owned internal key, used where keys outlive the buffers they were read from
/// (file boundaries in the manifest, seek targets).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct InternalKey(Vec<u8>);

impl InternalKey {
    pub fn new(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Self {
        let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
        encode_internal_key(&mut v, user_key, seq, kind);
        InternalKey(v)
    }

    /// Wrap already-encoded bytes. Returns `None` unless they parse.
    pub fn from_encoded(bytes: Vec<u8>) -> Option<Self> {
        parse_internal_key(&bytes)?;
        Some(InternalKey(bytes))
    }

    pub fn encoded(&self) -> &[u8] {
        &self.0
    }

    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }

    /// The bound of a key range that ends just before `user_key`: the key at
    /// [`SeqNo::MAX`], which sorts before every real entry of `user_key`. A table whose
    /// range tombstones end at `user_key` has this as its largest key.
    pub fn range_end(user_key: &[u8]) -> InternalKey {
        InternalKey::new(user_key, SeqNo::MAX, ValueKind::RangeDelete)
    }

    /// Whether this is a [`InternalKey::range_end`] bound: a largest key that its user key
    /// is not part of.
    pub fn is_range_end(&self) -> bool {
        self.seq() == SeqNo::MAX
    }

    pub fn seq(&self) -> SeqNo {
        SeqNo(trailer(&self.0) >> 8)
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::fmt::Debug for InternalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match parse_internal_key(&self.0) {
            Some(p) => write!(
                f,
                "{}@{}:{:?}",
                String::from_utf8_lossy(p.user_key),
                p.seq.0,
                p.kind
            ),
            None => write!(f, "<bad key {:02x?}>", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn compare_bytes_is_slice_order() {
        // Every pair of keys over a small alphabet, of lengths around the word and inline
        // limits, with long shared prefixes: the cases a word-at-a-time compare gets wrong.
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        for len in [1usize, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40] {
            for last in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut k = vec![b'k'; len];
                if let Some(x) = k.last_mut() {
                    *x = last;
                }
                keys.push(k.clone());
                if let Some(x) = k.first_mut() {
                    *x = last;
                }
                keys.push(k);
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(super::compare_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    use super::*;

    #[test]
    fn round_trip() {
        let k = InternalKey::new(b"apple", SeqNo(42), ValueKind::Put);
        let p = parse_internal_key(k.encoded()).unwrap();
        assert_eq!(p.user_key, b"apple");
        assert_eq!(p.seq, SeqNo(42));
        assert_eq!(p.kind, ValueKind::Put);
        assert_eq!(k.seq(), SeqNo(42));
    }

    #[test]
    fn rejects_short_and_unknown_kind() {
        assert!(parse_internal_key(b"short").is_none());
        let mut k = InternalKey::new(b"a", SeqNo(1), ValueKind::Put)
            .encoded()
            .to_vec();
        k[1] = 7; // the kind byte is the first trailer byte (little-endian)
        assert!(parse_internal_key(&k).is_none());
    }

    #[test]
    fn newer_versions_sort_first() {
        let a1 = InternalKey::new(b"a", SeqNo(1), ValueKind::Put);
        let a2 = InternalKey::new(b"a", SeqNo(2), ValueKind::Put);
        let a2d = InternalKey::new(b"a", SeqNo(2), ValueKind::Delete);
        let b0 = InternalKey::new(b"b", SeqNo(0), ValueKind::Put);
        let mut v = vec![b0.clone(), a1.clone(), a2d.clone(), a2.clone()];
        v.sort();
        assert_eq!(v, vec![a2, a2d, a1, b0]);
    }
}
