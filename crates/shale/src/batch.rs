//! `WriteBatch`: a group of puts and deletes applied atomically, and its encoding, which is
//! exactly the payload of one WAL record.
//!
//! ```text
//! batch  := seq:u64 count:u32 entry{count}
//! entry  := kind:u8 [keyspace:varint] key:varbytes [value:varbytes]
//!           (kind 0 Delete: no value; 1 Put: the value; 2 RangeDelete: key is the range's
//!            start, value its exclusive end; the kind's bit 0x80 set: a keyspace id
//!            other than the default's follows the kind)
//! varbytes := len:varint bytes[len]
//! ```
//!
//! `seq` is the sequence number of the first entry; entry `i` gets `seq + i`. It is filled
//! in by the writer that commits the batch, not by the user.

use crate::codec::{self, DecodeError, Decoder};
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};
use crate::keyspace::KeyspaceId;
use crate::options::{MAX_BATCH_ENTRIES, MAX_KEY_BYTES, MAX_VALUE_BYTES};

/// Size of the batch header (`seq` and `count`).
pub const HEADER_LEN: usize = 12;

/// The bit of an entry's kind byte that says a keyspace id follows.
const IN_KEYSPACE: u8 = 0x80;

/// Puts, deletes and range deletes to apply together: after any crash, all or none of them are visible.
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    /// The encoded entries; the header is written when the batch is committed.
    rep: Vec<u8>,
    count: u32,
    /// Whether an entry names a keyspace other than the default.
    keyspaces: bool,
    /// The first limit violation seen while building, reported by `Db::write`.
    oversized: Option<String>,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("count", &self.count)
            .field("bytes", &self.rep.len())
            .finish()
    }
}

impl WriteBatch {
    pub fn new() -> Self {
        WriteBatch {
            rep: Vec::new(),
            count: 0,
            keyspaces: false,
            oversized: None,
        }
    }

    /// Set `key` to `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.put_in(KeyspaceId::DEFAULT, key, value);
    }

    /// Remove `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.delete_in(KeyspaceId::DEFAULT, key);
    }

    /// Remove every key `k` with `start <= k < end`: one entry, whatever the number of keys
    /// it covers. An empty range (`start == end`) removes nothing; `start > end` makes the
    /// write fail with `InvalidArgument`.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        self.delete_range_in(KeyspaceId::DEFAULT, start, end);
    }

    /// Set `key` to `value` in keyspace `ks` (a [`crate::Keyspace`] or its id).
    pub fn put_in(
        &mut self,
        ks: impl Into<KeyspaceId>,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.check_limits(key, Some(value));
        // One allocation for a one-entry batch, not a series of doublings.
        self.rep.reserve(
            6 + codec::varint_len(key.len() as u64)
                + key.len()
                + codec::varint_len(value.len() as u64)
                + value.len(),
        );
        self.push_kind(ValueKind::Put, ks.into());
        codec::put_length_prefixed(&mut self.rep, key);
        codec::put_length_prefixed(&mut self.rep, value);
        self.count = self.count.saturating_add(1);
    }

    /// Remove `key` from keyspace `ks`.
    pub fn delete_in(&mut self, ks: impl Into<KeyspaceId>, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        self.check_limits(key, None);
        self.push_kind(ValueKind::Delete, ks.into());
        codec::put_length_prefixed(&mut self.rep, key);
        self.count = self.count.saturating_add(1);
    }

    /// Remove every key `k` with `start <= k < end` from keyspace `ks`, as
    /// [`WriteBatch::delete_range`].
    pub fn delete_range_in(
        &mut self,
        ks: impl Into<KeyspaceId>,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) {
        let (start, end) = (start.as_ref(), end.as_ref());
        self.check_limits(start, None);
        self.check_limits(end, None);
        if self.oversized.is_none() && start > end {
            self.oversized = Some("delete_range: start is after end".to_owned());
        }
        self.push_kind(ValueKind::RangeDelete, ks.into());
        codec::put_length_prefixed(&mut self.rep, start);
        codec::put_length_prefixed(&mut self.rep, end);
        self.count = self.count.saturating_add(1);
    }

    /// An entry's kind byte, and the keyspace id after it unless it is the default's.
    fn push_kind(&mut self, kind: ValueKind, ks: KeyspaceId) {
        if ks.is_default() {
            self.rep.push(kind as u8);
        } else {
            self.rep.push(kind as u8 | IN_KEYSPACE);
            codec::put_varint(&mut self.rep, u64::from(ks.0));
            self.keyspaces = true;
        }
    }

    /// Whether any entry names a keyspace other than the default.
    pub fn has_keyspaces(&self) -> bool {
        self.keyspaces
    }

    fn check_limits(&mut self, key: &[u8], value: Option<&[u8]>) {
        if self.oversized.is_some() {
            return;
        }
        if self.count >= MAX_BATCH_ENTRIES {
            self.oversized = Some(format!("a batch holds at most {MAX_BATCH_ENTRIES} entries"));
        } else if key.len() > MAX_KEY_BYTES {
            self.oversized = Some(format!(
                "key of {} bytes exceeds the limit of {MAX_KEY_BYTES}",
                key.len()
            ));
        } else if let Some(v) = value.filter(|v| v.len() > MAX_VALUE_BYTES) {
            self.oversized = Some(format!(
                "value of {} bytes exceeds the limit of {MAX_VALUE_BYTES}",
                v.len()
            ));
        }
    }

    /// Entries in the batch.
    /// The batch's entries, in order. An entry's `seq` is its position in the batch: the
    /// sequence number it gets when committed is the batch's first plus that.
    pub fn iter(&self) -> impl Iterator<Item = BatchEntry<'_>> + '_ {
        // A batch encoded by `WriteBatch` itself always decodes.
        decode_entries(self.body(), SeqNo(0)).map_while(|entry| entry.ok())
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Remove every entry, keeping the allocation.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.count = 0;
        self.keyspaces = false;
        self.oversized = None;
    }

    /// Encoded size in bytes.
    pub fn approximate_size(&self) -> usize {
        HEADER_LEN + self.rep.len()
    }

    /// `InvalidArgument` if any entry broke a size limit.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.oversized {
            Some(msg) => Err(Error::invalid(msg.clone())),
            None => Ok(()),
        }
    }

    /// The encoded entries, without the header.
    pub(crate) fn body(&self) -> &[u8] {
        &self.rep
    }

    /// Number of entries, as stored in the header.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }
}

/// The header of a batch (or of a group of batches written as one WAL record).
pub(crate) fn encode_header(first_seq: SeqNo, count: u32) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    let (seq, n) = h.split_at_mut(8);
    seq.copy_from_slice(&first_seq.0.to_le_bytes());
    n.copy_from_slice(&count.to_le_bytes());
    h
}

/// Decode the entries of a batch body whose first entry has sequence number `first_seq`.
pub(crate) fn decode_entries(
    body: &[u8],
    first_seq: SeqNo,
) -> impl Iterator<Item = Result<BatchEntry<'_>, DecodeError>> + '_ {
    let mut d = Decoder::new(body);
    let mut seq = first_seq;
    std::iter::from_fn(move || {
        if d.is_empty() {
            return None;
        }
        let entry = decode_entry(&mut d, seq);
        if entry.is_err() {
            // Stop after the first error.
            d = Decoder::new(&[]);
        }
        // Saturating: a header read from disk may claim any first sequence number (the
        // reader rejects one that overflows, but only after walking the entries).
        seq = SeqNo(seq.0.saturating_add(1));
        Some(entry)
    })
}

fn decode_entry<'a>(d: &mut Decoder<'a>, seq: SeqNo) -> Result<BatchEntry<'a>, DecodeError> {
    let kind_byte = d.u8("entry kind")?;
    let kind = ValueKind::from_u8(kind_byte & !IN_KEYSPACE)
        .ok_or_else(|| DecodeError::new(d.position() - 1, format!("unknown kind {kind_byte}")))?;
    let keyspace = if kind_byte & IN_KEYSPACE == 0 {
        KeyspaceId::DEFAULT
    } else {
        let at = d.position();
        let id = KeyspaceId(d.varint_u32("entry keyspace")?);
        if id.is_default() {
            // The default keyspace is written without an id: one encoding per entry.
            return Err(DecodeError::new(at, "the default keyspace spelled out"));
        }
        id
    };
    let key = d.length_prefixed("entry key")?;
    let value = match kind {
        ValueKind::Put => d.length_prefixed("entry value")?,
        ValueKind::RangeDelete => d.length_prefixed("range end")?,
        ValueKind::Delete => &[][..],
    };
    Ok(BatchEntry {
        seq,
        kind,
        keyspace,
        key,
        value,
    })
}

/// One entry of an encoded batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    pub seq: SeqNo,
    pub kind: ValueKind,
    pub keyspace: KeyspaceId,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// A decoded view of an encoded batch: validates the whole encoding up front so that a
/// batch is applied entirely or not at all.
#[derive(Debug)]
pub struct BatchReader<'a> {
    pub first_seq: SeqNo,
    pub count: u32,
    body: &'a [u8],
}

impl<'a> BatchReader<'a> {
    /// Parse the header and check that exactly `count` well-formed entries follow.
    pub fn new(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut d = Decoder::new(bytes);
        let first_seq = SeqNo(d.u64("batch sequence")?);
        let count = d.u32("batch count")?;
        let body = d.remaining();
        // The last entry gets `first_seq + count - 1`, which must fit in a trailer. Checked
        // before the entries are walked, so that no sequence number computed below overflows.
        let last = first_seq.0.checked_add(u64::from(count.saturating_sub(1)));
        if last.is_none_or(|last| last > SeqNo::MAX.0) {
            return Err(DecodeError::new(0, "batch sequence numbers overflow"));
        }
        let reader = BatchReader {
            first_seq,
            count,
            body,
        };
        let mut seen = 0u32;
        for entry in reader.entries() {
            entry.map_err(|e| DecodeError::new(e.offset + HEADER_LEN, e.reason))?;
            seen += 1;
        }
        if seen != count {
            return Err(DecodeError::new(
                8,
                format!("batch header says {count} entries, found {seen}"),
            ));
        }
        Ok(reader)
    }

    /// Iterate over the entries (already validated by `new`).
    pub fn entries(&self) -> impl Iterator<Item = Result<BatchEntry<'a>, DecodeError>> + 'a {
        decode_entries(self.body, self.first_seq)
    }

    /// The encoded entries, without the header.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(b: &WriteBatch, seq: SeqNo) -> Vec<u8> {
        let mut v = encode_header(seq, b.count()).to_vec();
        v.extend_from_slice(b.body());
        v
    }

    #[test]
    fn a_batch_past_the_entry_limit_is_refused() {
        let mut b = WriteBatch::new();
        b.delete(b"a");
        // As if MAX_BATCH_ENTRIES - 1 more entries had been added (hundreds of MB).
        b.count = MAX_BATCH_ENTRIES;
        assert!(b.check().is_ok());
        b.delete(b"b");
        let refused = b.check().unwrap_err();
        assert!(refused.to_string().contains("at most"), "{refused}");
        b.clear();
        b.put(b"k", b"v");
        assert!(b.check().is_ok());
    }

    #[test]
    fn round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.put(b"", b"");
        let bytes = encoded(&b, SeqNo(100));
        let r = BatchReader::new(&bytes).unwrap();
        assert_eq!(r.first_seq, SeqNo(100));
        let entries: Vec<_> = r.entries().map(|e| e.unwrap()).collect();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].key, b"k1");
        assert_eq!(entries[0].value, b"v1");
        assert_eq!(entries[1].kind, ValueKind::Delete);
        assert_eq!(entries[1].seq, SeqNo(101));
        assert_eq!(entries[2].seq, SeqNo(102));
    }

    #[test]
    fn a_range_delete_round_trips_and_an_inverted_one_is_refused() {
        let mut b = WriteBatch::new();
        b.delete_range(b"a", b"m");
        b.delete_range(b"q", b"q");
        assert!(b.check().is_ok());
        let bytes = encoded(&b, SeqNo(5));
        let entries: Vec<_> = BatchReader::new(&bytes)
            .unwrap()
            .entries()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(entries[0].kind, ValueKind::RangeDelete);
        assert_eq!((entries[0].key, entries[0].value), (&b"a"[..], &b"m"[..]));
        assert_eq!(entries[1].seq, SeqNo(6));
        b.delete_range(b"z", b"b");
        let refused = b.check().unwrap_err();
        assert!(
            refused.to_string().contains("start is after end"),
            "{refused}"
        );
    }

    #[test]
    fn every_truncation_and_most_flips_are_rejected() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        b.delete(b"gone");
        let bytes = encoded(&b, SeqNo(7));
        for cut in 0..bytes.len() {
            assert!(BatchReader::new(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // A flipped byte either fails to decode or decodes to something else; it never
        // panics. (The WAL checksum is what catches flips that still decode.)
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            let _ = BatchReader::new(&bad).map(|r| r.entries().count());
        }
    }

    #[test]
    fn sequence_numbers_past_the_trailer_are_rejected_not_overflowed() {
        // Found by the wal_reader fuzz target: a header claiming first_seq = u64::MAX made
        // the entry walk overflow (a panic where overflow checks are on).
        let mut b = WriteBatch::new();
        b.delete(b"a");
        b.delete(b"b");
        for seq in [u64::MAX, SeqNo::MAX.0, SeqNo::MAX.0 + 1] {
            let bytes = encoded(&b, SeqNo(seq));
            assert!(BatchReader::new(&bytes).is_err(), "first_seq {seq:#x}");
        }
        let bytes = encoded(&b, SeqNo(SeqNo::MAX.0 - 1));
        assert_eq!(BatchReader::new(&bytes).unwrap().entries().count(), 2);
        let last = decode_entries(b.body(), SeqNo(u64::MAX))
            .map(|e| e.unwrap().seq)
            .last();
        assert_eq!(last, Some(SeqNo(u64::MAX)));
    }

    #[test]
    fn entries_name_their_keyspace_and_the_default_is_written_as_before() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        let plain = b.body().to_vec();
        assert_eq!(plain, [1, 1, b'k', 1, b'v']);
        b.put_in(KeyspaceId(300), b"k", b"v");
        b.delete_in(KeyspaceId(1), b"d");
        b.delete_range_in(KeyspaceId(1), b"a", b"b");
        assert_eq!(&b.body()[5..9], &[0x81, 0xac, 0x02, 1]);
        let got: Vec<_> = b.iter().map(|e| (e.keyspace, e.kind)).collect();
        assert_eq!(
            got,
            [
                (KeyspaceId::DEFAULT, ValueKind::Put),
                (KeyspaceId(300), ValueKind::Put),
                (KeyspaceId(1), ValueKind::Delete),
                (KeyspaceId(1), ValueKind::RangeDelete),
            ]
        );
        assert!(b.has_keyspaces());
        // The default keyspace spelled out is not a second encoding of the same entry.
        let mut bytes = encode_header(SeqNo(1), 1).to_vec();
        bytes.extend_from_slice(&[0x81, 0, 1, b'k', 1, b'v']);
        assert!(BatchReader::new(&bytes).is_err());
    }

    #[test]
    fn oversized_entries_are_reported() {
        let mut b = WriteBatch::new();
        b.put(vec![0u8; MAX_KEY_BYTES + 1], b"v");
        assert!(matches!(b.check(), Err(Error::InvalidArgument(_))));
        b.clear();
        assert!(b.check().is_ok());
    }
}
