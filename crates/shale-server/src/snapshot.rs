//! Snapshot files: written frame by frame from a pinned Shale snapshot, read frame by frame
//! to send or install one, so a snapshot is never held whole in memory (a few frames of
//! about [`TARGET_FRAME_PAYLOAD`] bytes at a time, or one pair when a value is larger).
//!
//! A file is `header pairs* index_file* end` (docs/format.md, "Snapshot file"); the same
//! frames are the messages of the `InstallSnapshot` stream. [`FrameSequence`] checks the order and
//! the counts wherever frames arrive: from a file or from the network.
//!
//! Thread safety: each value here belongs to one thread at a time; they are used from
//! blocking tasks.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{
    self, FrameKind, IndexFileChunk, SnapshotHeader, FRAME_HEAD_LEN, FRAME_TAIL_LEN,
    TARGET_FRAME_PAYLOAD,
};

mod data;

pub use data::SnapshotData;

impl SnapshotData {
    /// A reader over the frames, from the first.
    ///
    /// # Errors
    /// `Io` if the handle cannot be duplicated or rewound.
    pub fn frames(&self) -> Result<FrameReader<BufReader<File>>> {
        Ok(FrameReader::new(
            BufReader::new(self.rewound()?),
            self.path().display().to_string(),
        ))
    }

    /// The header frame, checked.
    ///
    /// # Errors
    /// `Io`, or `Corruption` if the file does not start with a valid header frame.
    pub fn header(&self) -> Result<SnapshotHeader> {
        let mut frames = self.frames()?;
        let mut seq = FrameSequence::default();
        let frame = frames.next_frame()?.ok_or_else(|| {
            Error::corruption(self.path().display().to_string(), "empty snapshot file")
        })?;
        match seq.accept(&frame)? {
            Accepted::Header(h) => Ok(h),
            _ => Err(Error::corruption(
                self.path().display().to_string(),
                "no header frame",
            )),
        }
    }
}

/// Reads whole frames, each checked against its checksum, from a byte stream.
pub struct FrameReader<R> {
    r: R,
    what: String,
    offset: u64,
}

impl<R: Read> FrameReader<R> {
    pub fn new(r: R, what: String) -> Self {
        FrameReader { r, what, offset: 0 }
    }

    /// The next frame's bytes (head, payload, checksum), or `None` at a clean end.
    ///
    /// # Errors
    /// `Io`; `Corruption` for a torn frame, a length over the limit or a bad checksum.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>> {
        let mut head = [0u8; FRAME_HEAD_LEN];
        let mut got = 0;
        while got < FRAME_HEAD_LEN {
            let rest = head.get_mut(got..).unwrap_or_default();
            match self.r.read(rest) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => {
                    return Err(self.corrupt(format!("torn frame head at offset {}", self.offset)))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read", self.what.clone(), e)),
            }
        }
        let what = format!("{} at offset {}", self.what, self.offset);
        let (_, len) = format::decode_frame_head(&head, &what)?;
        let total = FRAME_HEAD_LEN + len + FRAME_TAIL_LEN;
        let mut frame = vec![0u8; total];
        let (dst_head, dst_rest) = frame.split_at_mut(FRAME_HEAD_LEN);
        dst_head.copy_from_slice(&head);
        self.r.read_exact(dst_rest).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                self.corrupt(format!("torn frame at offset {}", self.offset))
            } else {
                Error::io("read", self.what.clone(), e)
            }
        })?;
        format::decode_frame(&frame, &what)?;
        self.offset = self.offset.saturating_add(total as u64);
        Ok(Some(frame))
    }

    fn corrupt(&self, reason: String) -> Error {
        Error::corruption(self.what.clone(), reason)
    }
}

/// What one accepted frame holds.
pub enum Accepted<'a> {
    Header(SnapshotHeader),
    Pairs(Vec<(&'a [u8], &'a [u8])>),
    IndexFile(IndexFileChunk<'a>),
    End,
}

/// Checks that frames come as `header pairs* index_file* end`, keys ascending across
/// frames, the index files in (index, file) order with each file's pieces contiguous from
/// offset 0, and that the end frame's counts match what came.
#[derive(Debug, Default)]
pub struct FrameSequence {
    frames: u64,
    pairs: u64,
    header_seen: bool,
    ended: bool,
    last_key: Option<Vec<u8>>,
    /// The index file being received, and the bytes of it so far.
    file: Option<(String, String, u64)>,
}

impl FrameSequence {
    /// Check `frame` (whole, with its checksum) as the next one.
    ///
    /// # Errors
    /// `Corruption` for a bad frame or one out of place.
    pub fn accept<'a>(&mut self, frame: &'a [u8]) -> Result<Accepted<'a>> {
        let what = format!("snapshot frame {}", self.frames);
        let (kind, payload) = format::decode_frame(frame, &what)?;
        if self.ended {
            return Err(Error::corruption(what, "a frame after the end frame"));
        }
        let accepted = match (kind, self.header_seen) {
            (FrameKind::Header, false) => {
                self.header_seen = true;
                Accepted::Header(format::decode_snapshot_header(payload)?)
            }
            (FrameKind::Header, true) => return Err(Error::corruption(what, "a second header")),
            (_, false) => return Err(Error::corruption(what, "the first frame is not a header")),
            (FrameKind::Pairs, true) if self.file.is_some() => {
                return Err(Error::corruption(what, "pairs after an index file"));
            }
            (FrameKind::Pairs, true) => {
                let pairs = format::decode_pairs(payload)?;
                if let (Some(last), Some((first, _))) = (&self.last_key, pairs.first()) {
                    if last.as_slice() >= *first {
                        return Err(Error::corruption(what, "keys out of order across frames"));
                    }
                }
                self.last_key = pairs.last().map(|(k, _)| k.to_vec());
                self.pairs = self.pairs.saturating_add(pairs.len() as u64);
                Accepted::Pairs(pairs)
            }
            (FrameKind::IndexFile, true) => {
                let chunk = format::decode_index_file_chunk(payload)?;
                self.accept_file_chunk(&chunk)
                    .map_err(|reason| Error::corruption(what, reason))?;
                Accepted::IndexFile(chunk)
            }
            (FrameKind::End, true) => {
                let (pairs, frames) = format::decode_snapshot_end(payload)?;
                if pairs != self.pairs || frames != self.frames {
                    return Err(Error::corruption(
                        what,
                        format!(
                            "end frame counts {pairs} pairs in {frames} frames, {} pairs in {} frames came",
                            self.pairs, self.frames
                        ),
                    ));
                }
                self.ended = true;
                Accepted::End
            }
        };
        self.frames = self.frames.saturating_add(1);
        Ok(accepted)
    }

    /// Check a piece of an index file against the pieces before it.
    fn accept_file_chunk(&mut self, chunk: &IndexFileChunk<'_>) -> std::result::Result<(), String> {
        let len = chunk.bytes.len() as u64;
        match &mut self.file {
            Some((index, file, received)) if index == chunk.index && file == chunk.file => {
                if chunk.offset != *received {
                    return Err(format!(
                        "index {} file {}: a piece at offset {} after {} bytes",
                        chunk.index, chunk.file, chunk.offset, received
                    ));
                }
                *received = received.saturating_add(len);
            }
            previous => {
                let ascending = previous.as_ref().is_none_or(|(index, file, _)| {
                    (index.as_str(), file.as_str()) < (chunk.index, chunk.file)
                });
                if !ascending || chunk.offset != 0 {
                    return Err(format!(
                        "index {} file {} out of order (offset {})",
                        chunk.index, chunk.file, chunk.offset
                    ));
                }
                *previous = Some((chunk.index.to_owned(), chunk.file.to_owned(), len));
            }
        }
        Ok(())
    }

    /// True once the end frame was accepted.
    pub fn is_complete(&self) -> bool {
        self.ended
    }

    /// Pairs accepted so far.
    pub fn pairs(&self) -> u64 {
        self.pairs
    }
}

/// Writes a snapshot file: the header at creation, pairs in key order, the end frame and
/// an fsync at [`SnapshotWriter::finish`].
pub struct SnapshotWriter {
    out: BufWriter<File>,
    path: PathBuf,
    payload: Vec<u8>,
    frame: Vec<u8>,
    frames: u64,
    pairs: u64,
}

impl SnapshotWriter {
    /// Create (or truncate) `path` and write the header frame.
    ///
    /// # Errors
    /// `Io`.
    pub fn create(path: &Path, header: &SnapshotHeader) -> Result<SnapshotWriter> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        let mut w = SnapshotWriter {
            out: BufWriter::new(file),
            path: path.to_path_buf(),
            payload: Vec::with_capacity(TARGET_FRAME_PAYLOAD),
            frame: Vec::new(),
            frames: 0,
            pairs: 0,
        };
        let header = format::encode_snapshot_header(header);
        w.write_frame(FrameKind::Header, &header)?;
        Ok(w)
    }

    /// Add one pair; keys must ascend.
    ///
    /// # Errors
    /// `Io`.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        format::put_pair(&mut self.payload, key, value);
        self.pairs = self.pairs.saturating_add(1);
        if self.payload.len() >= TARGET_FRAME_PAYLOAD {
            self.flush_pairs()?;
        }
        Ok(())
    }

    /// Add the file at `path` as `index`'s `file`, in pieces of about a frame each (an empty
    /// file as one empty piece), after every pair. Files come in (index, file) order.
    ///
    /// # Errors
    /// `Io`.
    pub fn add_index_file(&mut self, index: &str, file: &str, path: &Path) -> Result<()> {
        self.flush_pairs()?;
        let mut input = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let mut buf = vec![0u8; TARGET_FRAME_PAYLOAD];
        let mut offset = 0u64;
        loop {
            let n = read_full(&mut input, &mut buf).map_err(|e| Error::io("read", path, e))?;
            if n == 0 && offset > 0 {
                return Ok(());
            }
            let chunk = IndexFileChunk {
                index,
                file,
                offset,
                bytes: buf.get(..n).unwrap_or_default(),
            };
            let payload = format::encode_index_file_chunk(&chunk);
            self.write_frame(FrameKind::IndexFile, &payload)?;
            offset = offset.saturating_add(n as u64);
            if n < buf.len() {
                return Ok(());
            }
        }
    }

    /// Write the last pairs frame and the end frame, and fsync the file.
    ///
    /// # Errors
    /// `Io`.
    pub fn finish(mut self) -> Result<()> {
        self.flush_pairs()?;
        let end = format::encode_snapshot_end(self.pairs, self.frames);
        self.write_frame(FrameKind::End, &end)?;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::io("write", &self.path, e.into_error()))?;
        file.sync_all()
            .map_err(|e| Error::io("fsync", &self.path, e))
    }

    fn flush_pairs(&mut self) -> Result<()> {
        if self.payload.is_empty() {
            return Ok(());
        }
        let payload = std::mem::take(&mut self.payload);
        self.write_frame(FrameKind::Pairs, &payload)?;
        self.payload = payload;
        self.payload.clear();
        Ok(())
    }

    fn write_frame(&mut self, kind: FrameKind, payload: &[u8]) -> Result<()> {
        self.frame.clear();
        format::encode_frame(kind, payload, &mut self.frame)?;
        self.out
            .write_all(&self.frame)
            .map_err(|e| Error::io("write", &self.path, e))?;
        self.frames = self.frames.saturating_add(1);
        Ok(())
    }
}

/// Read into `buf` until it is full or the input ends; the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        match input.read(rest) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Writes frames that were checked elsewhere, byte for byte.
pub struct RawFrameWriter {
    out: BufWriter<File>,
    path: PathBuf,
}

impl RawFrameWriter {
    /// Create (or truncate) `path` for frames copied as they came (a snapshot received or
    /// being installed).
    ///
    /// # Errors
    /// `Io`.
    pub fn create(path: &Path) -> Result<RawFrameWriter> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        Ok(RawFrameWriter {
            out: BufWriter::new(file),
            path: path.to_path_buf(),
        })
    }

    /// Append one whole frame.
    ///
    /// # Errors
    /// `Io`.
    pub fn write(&mut self, frame: &[u8]) -> Result<()> {
        self.out
            .write_all(frame)
            .map_err(|e| Error::io("write", &self.path, e))
    }

    /// Flush and fsync.
    ///
    /// # Errors
    /// `Io`.
    pub fn finish(self) -> Result<()> {
        let path = self.path;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::io("write", &path, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io("fsync", &path, e))
    }
}

/// fsync a directory, so that a rename or a creation in it survives power loss.
///
/// # Errors
/// `Io`.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync dir", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{BasicNode, CommittedLeaderId, LogId, Membership, StoredMembership};
    use std::collections::BTreeSet;

    fn header() -> SnapshotHeader {
        SnapshotHeader {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(1, 1), 10)),
            membership: StoredMembership::new(
                Some(LogId::new(CommittedLeaderId::new(1, 1), 1)),
                Membership::<u64, BasicNode>::new(vec![BTreeSet::from([1])], ()),
            ),
            snapshot_id: "t".into(),
        }
    }

    fn write(path: &Path, n: u32) {
        let mut w = SnapshotWriter::create(path, &header()).expect("create");
        for i in 0..n {
            w.add(format!("key{i:08}").as_bytes(), &[7u8; 1000])
                .expect("add");
        }
        w.finish().expect("finish");
    }

    fn read_all(path: &Path) -> Result<u64> {
        let data = SnapshotData::open(path)?;
        let mut frames = data.frames()?;
        let mut seq = FrameSequence::default();
        while let Some(f) = frames.next_frame()? {
            seq.accept(&f)?;
        }
        if !seq.is_complete() {
            return Err(Error::corruption("test", "no end frame"));
        }
        Ok(seq.pairs())
    }

    #[test]
    fn a_written_snapshot_reads_back_in_frames() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.snap");
        write(&path, 500);
        assert_eq!(read_all(&path).expect("reads"), 500);
        assert_eq!(
            SnapshotData::open(&path)
                .expect("open")
                .header()
                .expect("header"),
            header()
        );
        // 500 pairs of ~1 KiB make several frames: the reader never needs them all at once.
        let data = SnapshotData::open(&path).expect("open");
        let mut frames = data.frames().expect("frames");
        let mut count = 0;
        while let Some(f) = frames.next_frame().expect("frame") {
            assert!(f.len() <= TARGET_FRAME_PAYLOAD + 2 * 1024);
            count += 1;
        }
        assert!(count > 3, "{count} frames");
    }

    /// The frames of a snapshot with index files, each accepted in turn.
    fn accept_all(frames: &[Vec<u8>]) -> Result<Vec<(String, String, u64, usize)>> {
        let mut seq = FrameSequence::default();
        let mut pieces = Vec::new();
        for frame in frames {
            if let Accepted::IndexFile(c) = seq.accept(frame)? {
                pieces.push((c.index.into(), c.file.into(), c.offset, c.bytes.len()));
            }
        }
        Ok(pieces)
    }

    fn frame(kind: FrameKind, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        format::encode_frame(kind, payload, &mut out).expect("frame");
        out
    }

    fn piece(index: &str, file: &str, offset: u64, bytes: &[u8]) -> Vec<u8> {
        let chunk = IndexFileChunk {
            index,
            file,
            offset,
            bytes,
        };
        frame(
            FrameKind::IndexFile,
            &format::encode_index_file_chunk(&chunk),
        )
    }

    #[test]
    fn index_files_follow_the_pairs_in_pieces() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = dir.path().join("big");
        std::fs::write(&big, vec![3u8; 2 * TARGET_FRAME_PAYLOAD + 10]).expect("write");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").expect("write");
        let path = dir.path().join("s.snap");
        let mut w = SnapshotWriter::create(&path, &header()).expect("create");
        w.add(b"a", b"1").expect("add");
        w.add_index_file("docs", "GRAPH", &big).expect("file");
        w.add_index_file("docs", "MODEL", &empty).expect("file");
        w.finish().expect("finish");

        let data = SnapshotData::open(&path).expect("open");
        let mut frames = data.frames().expect("frames");
        let mut all = Vec::new();
        while let Some(f) = frames.next_frame().expect("frame") {
            all.push(f);
        }
        let pieces = accept_all(&all).expect("a valid sequence");
        let want: Vec<(String, String, u64, usize)> = vec![
            ("docs".into(), "GRAPH".into(), 0, TARGET_FRAME_PAYLOAD),
            (
                "docs".into(),
                "GRAPH".into(),
                TARGET_FRAME_PAYLOAD as u64,
                TARGET_FRAME_PAYLOAD,
            ),
            (
                "docs".into(),
                "GRAPH".into(),
                2 * TARGET_FRAME_PAYLOAD as u64,
                10,
            ),
            ("docs".into(), "MODEL".into(), 0, 0),
        ];
        assert_eq!(pieces, want);

        // Refused: pairs after a file, a gap, a file out of order, a restart of a file, a
        // name that would leave the index's directory.
        let head = all.first().expect("header").clone();
        let pairs = all.get(1).expect("pairs").clone();
        let mut payload = Vec::new();
        format::put_pair(&mut payload, b"z", b"1");
        let later_pairs = frame(FrameKind::Pairs, &payload);
        let bad: Vec<(&str, Vec<Vec<u8>>)> = vec![
            (
                "pairs after a file",
                vec![piece("docs", "A", 0, b"x"), later_pairs],
            ),
            (
                "a gap",
                vec![piece("docs", "A", 0, b"xy"), piece("docs", "A", 3, b"z")],
            ),
            (
                "out of order",
                vec![piece("docs", "B", 0, b""), piece("docs", "A", 0, b"")],
            ),
            (
                "a restart",
                vec![piece("docs", "A", 0, b"x"), piece("docs", "A", 0, b"x")],
            ),
            ("first piece not at 0", vec![piece("docs", "A", 5, b"x")]),
            ("a path", vec![piece("docs", "../A", 0, b"x")]),
            ("a dot", vec![piece("docs", "..", 0, b"x")]),
            ("a bad index name", vec![piece("../d", "A", 0, b"x")]),
        ];
        for (what, frames) in bad {
            let mut seq = vec![head.clone(), pairs.clone()];
            seq.extend(frames);
            let err = accept_all(&seq).expect_err(what);
            assert!(err.is_corruption(), "{what}: {err}");
        }
    }

    #[test]
    fn a_torn_or_damaged_snapshot_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.snap");
        write(&path, 200);
        let bytes = std::fs::read(&path).expect("read");
        // Torn: any cut short of the whole file fails (a missing end frame included).
        for cut in [1, FRAME_HEAD_LEN, bytes.len() / 2, bytes.len() - 1] {
            std::fs::write(&path, bytes.get(..cut).unwrap_or_default()).expect("write");
            assert!(read_all(&path).is_err(), "cut at {cut}");
        }
        // A flipped byte in the middle of a pairs frame.
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        if let Some(b) = bad.get_mut(mid) {
            *b ^= 1;
        }
        std::fs::write(&path, &bad).expect("write");
        assert!(read_all(&path).unwrap_err().is_corruption());
    }
}
