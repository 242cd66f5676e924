//! `VersionEdit`: one change to the set of live files, as written to the MANIFEST.
//!
//! An edit is a sequence of tagged fields; a field may appear at most once except the
//! repeated file entries. Tags are never reused; an unknown tag is corruption (a newer
//! format), not something to skip.
//!
//! ```text
//! edit      := field*
//! field     := 1 log_number:varint            WALs numbered below this are obsolete
//!            | 2 next_file_number:varint
//!            | 3 last_seq:varint
//!            | 4 level:u8 file_id:varint size:varint smallest:varbytes largest:varbytes
//!                smallest_seq:varint largest_seq:varint                      (new file)
//!            | 5 level:u8 file_id:varint                                   (deleted file)
//!            | 6 (as 4)                        (new file with a range-del block, format v2)
//!            | 7 keyspace                      (keyspace created, or its options changed;
//!                                               as in `version/keyspace.rs`, format v3)
//!            | 8 keyspace_id:varint            (keyspace dropped, format v3)
//!            | 9 next_keyspace_id:varint       (format v3)
//!            | 10 keyspace_id:varint flags:u8 (as 4 from `level` on)
//!                                  (new file of a keyspace other than the default; flags
//!                                   bit 0: it has a range-del block; format v3)
//! ```
//!
//! Files of the default keyspace are written with tags 4 and 6, so a database that never
//! made a keyspace writes the manifest of format v2. A deleted file needs no keyspace: its
//! id names it.

use std::collections::BTreeMap;

use super::keyspace::KeyspaceDef;
use crate::codec::{self, DecodeError, Decoder};
use crate::key::{InternalKey, SeqNo};
use crate::keyspace::KeyspaceId;

pub use crate::options::NUM_LEVELS;

pub use crate::filename::FileId;

/// A level of the tree, `0..NUM_LEVELS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Level(pub u8);

impl Level {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// What the manifest knows about an SSTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    pub id: FileId,
    /// The keyspace whose tree holds the file.
    pub keyspace: KeyspaceId,
    pub size: u64,
    pub smallest: InternalKey,
    pub largest: InternalKey,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    /// Whether the table holds range tombstones: readers gather them from such tables
    /// without opening the others.
    pub range_dels: bool,
}

const TAG_LOG_NUMBER: u8 = 1;
const TAG_NEXT_FILE_NUMBER: u8 = 2;
const TAG_LAST_SEQ: u8 = 3;
const TAG_NEW_FILE: u8 = 4;
const TAG_DELETED_FILE: u8 = 5;
const TAG_NEW_FILE_RANGE_DELS: u8 = 6;
const TAG_KEYSPACE: u8 = 7;
const TAG_DROPPED_KEYSPACE: u8 = 8;
const TAG_NEXT_KEYSPACE_ID: u8 = 9;
const TAG_KEYSPACE_FILE: u8 = 10;

/// `flags` bit of a keyspace file: it has a range-del block.
const FILE_RANGE_DELS: u8 = 1;

/// A change to the version set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    pub log_number: Option<FileId>,
    pub next_file_number: Option<FileId>,
    pub last_seq: Option<SeqNo>,
    pub new_files: Vec<(Level, FileMeta)>,
    pub deleted_files: Vec<(Level, FileId)>,
    /// Keyspaces created, or redefined with new options.
    pub keyspaces: Vec<KeyspaceDef>,
    pub dropped_keyspaces: Vec<KeyspaceId>,
    /// The id the next keyspace gets: ids are never reused.
    pub next_keyspace_id: Option<KeyspaceId>,
}

impl VersionEdit {
    /// The edit that starts a manifest: every live file, every keyspace and the counters. A
    /// database that never made a keyspace gets no keyspace fields (format v2).
    pub fn snapshot(
        log_number: FileId,
        next_file: u64,
        last_seq: SeqNo,
        files: &BTreeMap<FileId, (Level, FileMeta)>,
        keyspaces: &BTreeMap<KeyspaceId, KeyspaceDef>,
        next_keyspace_id: KeyspaceId,
    ) -> VersionEdit {
        VersionEdit {
            log_number: Some(log_number),
            next_file_number: Some(FileId(next_file)),
            last_seq: Some(last_seq),
            new_files: files.values().cloned().collect(),
            deleted_files: Vec::new(),
            keyspaces: keyspaces.values().cloned().collect(),
            dropped_keyspaces: Vec::new(),
            next_keyspace_id: (next_keyspace_id > KeyspaceId(1)).then_some(next_keyspace_id),
        }
    }

    /// Append the encoding of this edit to `dst`.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        if let Some(n) = self.log_number {
            codec::put_u8(dst, TAG_LOG_NUMBER);
            codec::put_varint(dst, n.0);
        }
        if let Some(n) = self.next_file_number {
            codec::put_u8(dst, TAG_NEXT_FILE_NUMBER);
            codec::put_varint(dst, n.0);
        }
        if let Some(s) = self.last_seq {
            codec::put_u8(dst, TAG_LAST_SEQ);
            codec::put_varint(dst, s.0);
        }
        if let Some(id) = self.next_keyspace_id {
            codec::put_u8(dst, TAG_NEXT_KEYSPACE_ID);
            codec::put_varint(dst, u64::from(id.0));
        }
        for def in &self.keyspaces {
            codec::put_u8(dst, TAG_KEYSPACE);
            def.encode(dst);
        }
        for id in &self.dropped_keyspaces {
            codec::put_u8(dst, TAG_DROPPED_KEYSPACE);
            codec::put_varint(dst, u64::from(id.0));
        }
        for (level, f) in &self.new_files {
            if f.keyspace.is_default() {
                let tag = if f.range_dels {
                    TAG_NEW_FILE_RANGE_DELS
                } else {
                    TAG_NEW_FILE
                };
                codec::put_u8(dst, tag);
            } else {
                codec::put_u8(dst, TAG_KEYSPACE_FILE);
                codec::put_varint(dst, u64::from(f.keyspace.0));
                codec::put_u8(dst, if f.range_dels { FILE_RANGE_DELS } else { 0 });
            }
            codec::put_u8(dst, level.0);
            codec::put_varint(dst, f.id.0);
            codec::put_varint(dst, f.size);
            codec::put_length_prefixed(dst, f.smallest.encoded());
            codec::put_length_prefixed(dst, f.largest.encoded());
            codec::put_varint(dst, f.smallest_seq.0);
            codec::put_varint(dst, f.largest_seq.0);
        }
        for (level, id) in &self.deleted_files {
            codec::put_u8(dst, TAG_DELETED_FILE);
            codec::put_u8(dst, level.0);
            codec::put_varint(dst, id.0);
        }
    }

    /// Decode an edit, checking every field.
    pub fn decode(src: &[u8]) -> Result<VersionEdit, DecodeError> {
        let mut d = Decoder::new(src);
        let mut edit = VersionEdit::default();
        while !d.is_empty() {
            let at = d.position();
            let tag = d.u8("edit tag")?;
            let dup = |what: &str| DecodeError::new(at, format!("{what} appears twice"));
            match tag {
                TAG_LOG_NUMBER => {
                    let v = FileId(d.varint("log number")?);
                    if edit.log_number.replace(v).is_some() {
                        return Err(dup("log number"));
                    }
                }
                TAG_NEXT_FILE_NUMBER => {
                    let v = FileId(d.varint("next file number")?);
                    if edit.next_file_number.replace(v).is_some() {
                        return Err(dup("next file number"));
                    }
                }
                TAG_LAST_SEQ => {
                    let v = SeqNo(d.varint("last sequence")?);
                    if v > SeqNo::MAX {
                        return Err(DecodeError::new(at, "last sequence out of range"));
                    }
                    if edit.last_seq.replace(v).is_some() {
                        return Err(dup("last sequence"));
                    }
                }
                TAG_NEW_FILE | TAG_NEW_FILE_RANGE_DELS | TAG_KEYSPACE_FILE => {
                    edit.new_files.push(decode_new_file(&mut d, tag, at)?);
                }
                TAG_DELETED_FILE => {
                    let level = decode_level(&mut d)?;
                    let id = FileId(d.varint("file id")?);
                    edit.deleted_files.push((level, id));
                }
                TAG_KEYSPACE => edit.keyspaces.push(KeyspaceDef::decode(&mut d)?),
                TAG_DROPPED_KEYSPACE => {
                    let id = KeyspaceId(d.varint_u32("dropped keyspace")?);
                    if id.is_default() {
                        return Err(DecodeError::new(at, "the default keyspace is dropped"));
                    }
                    edit.dropped_keyspaces.push(id);
                }
                TAG_NEXT_KEYSPACE_ID => {
                    let v = KeyspaceId(d.varint_u32("next keyspace id")?);
                    if edit.next_keyspace_id.replace(v).is_some() {
                        return Err(dup("next keyspace id"));
                    }
                }
                other => {
                    return Err(DecodeError::new(at, format!("unknown edit tag {other}")));
                }
            }
        }
        Ok(edit)
    }
}

/// The body of a new-file record of tag `tag` (at `at`): the keyspace and flags of a
/// `TAG_KEYSPACE_FILE`, then the level and the file's metadata.
fn decode_new_file(
    d: &mut Decoder<'_>,
    tag: u8,
    at: usize,
) -> Result<(Level, FileMeta), DecodeError> {
    let (keyspace, range_dels) = if tag == TAG_KEYSPACE_FILE {
        let keyspace = KeyspaceId(d.varint_u32("file keyspace")?);
        let flags = d.u8("file flags")?;
        if keyspace.is_default() || flags & !FILE_RANGE_DELS != 0 {
            return Err(DecodeError::new(at, "bad keyspace file record"));
        }
        (keyspace, flags & FILE_RANGE_DELS != 0)
    } else {
        (KeyspaceId::DEFAULT, tag == TAG_NEW_FILE_RANGE_DELS)
    };
    let level = decode_level(d)?;
    let id = FileId(d.varint("file id")?);
    let size = d.varint("file size")?;
    let smallest = decode_key(d, "smallest key")?;
    let largest = decode_key(d, "largest key")?;
    let smallest_seq = SeqNo(d.varint("smallest seq")?);
    let largest_seq = SeqNo(d.varint("largest seq")?);
    if smallest > largest || smallest_seq > largest_seq {
        return Err(DecodeError::new(at, "file bounds out of order"));
    }
    let meta = FileMeta {
        id,
        keyspace,
        size,
        smallest,
        largest,
        smallest_seq,
        largest_seq,
        range_dels,
    };
    Ok((level, meta))
}

fn decode_level(d: &mut Decoder<'_>) -> Result<Level, DecodeError> {
    let at = d.position();
    let level = d.u8("level")?;
    if usize::from(level) >= NUM_LEVELS {
        return Err(DecodeError::new(at, format!("level {level} out of range")));
    }
    Ok(Level(level))
}

fn decode_key(d: &mut Decoder<'_>, what: &str) -> Result<InternalKey, DecodeError> {
    let at = d.position();
    let bytes = d.length_prefixed(what)?;
    InternalKey::from_encoded(bytes.to_vec())
        .ok_or_else(|| DecodeError::new(at, format!("{what} is not an internal key")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ValueKind;

    pub(crate) fn sample() -> VersionEdit {
        VersionEdit {
            log_number: Some(FileId(7)),
            next_file_number: Some(FileId(12)),
            last_seq: Some(SeqNo(1000)),
            new_files: vec![
                (
                    Level(0),
                    FileMeta {
                        id: FileId(9),
                        keyspace: KeyspaceId::DEFAULT,
                        size: 4096,
                        smallest: InternalKey::new(b"apple", SeqNo(3), ValueKind::Put),
                        largest: InternalKey::new(b"pear", SeqNo(999), ValueKind::Delete),
                        smallest_seq: SeqNo(3),
                        largest_seq: SeqNo(999),
                        range_dels: false,
                    },
                ),
                (
                    Level(2),
                    FileMeta {
                        id: FileId(10),
                        keyspace: KeyspaceId(2),
                        size: 300,
                        smallest: InternalKey::new(b"b", SeqNo(5), ValueKind::RangeDelete),
                        largest: InternalKey::range_end(b"f"),
                        smallest_seq: SeqNo(5),
                        largest_seq: SeqNo(5),
                        range_dels: true,
                    },
                ),
            ],
            deleted_files: vec![(Level(1), FileId(4))],
            keyspaces: vec![KeyspaceDef {
                id: KeyspaceId(2),
                name: "log".into(),
                options: crate::options::KeyspaceOptions::from_db(&Default::default()),
            }],
            dropped_keyspaces: vec![KeyspaceId(1)],
            next_keyspace_id: Some(KeyspaceId(3)),
        }
    }

    #[test]
    fn round_trip() {
        let edit = sample();
        let mut buf = Vec::new();
        edit.encode(&mut buf);
        assert_eq!(VersionEdit::decode(&buf).unwrap(), edit);
        assert_eq!(VersionEdit::decode(&[]).unwrap(), VersionEdit::default());
    }

    #[test]
    fn truncations_and_flips_never_panic() {
        let mut buf = Vec::new();
        sample().encode(&mut buf);
        for cut in 1..buf.len() {
            // Every strict prefix either fails or decodes to a different, smaller edit.
            if let Ok(e) = VersionEdit::decode(&buf[..cut]) {
                assert_ne!(e, sample());
            }
        }
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x55;
            let _ = VersionEdit::decode(&bad);
        }
    }

    #[test]
    fn unknown_tags_and_levels_are_rejected() {
        assert!(VersionEdit::decode(&[99]).is_err());
        assert!(VersionEdit::decode(&[TAG_DELETED_FILE, NUM_LEVELS as u8, 1]).is_err());
        assert!(VersionEdit::decode(&[TAG_LOG_NUMBER, 1, TAG_LOG_NUMBER, 2]).is_err());
        assert!(VersionEdit::decode(&[TAG_DROPPED_KEYSPACE, 0]).is_err());
    }

    #[test]
    fn default_keyspace_files_keep_their_v2_tags() {
        let files = sample().new_files;
        for ((level, meta), tag) in files.into_iter().zip([TAG_NEW_FILE, TAG_KEYSPACE_FILE]) {
            let edit = VersionEdit {
                new_files: vec![(level, meta)],
                ..VersionEdit::default()
            };
            let mut buf = Vec::new();
            edit.encode(&mut buf);
            assert_eq!(buf[0], tag);
            assert_eq!(VersionEdit::decode(&buf).unwrap(), edit);
        }
    }
}
