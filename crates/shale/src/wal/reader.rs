//! Reads logical records back from a log held in memory.
//!
//! The one judgement the reader makes is what to do with damage. If nothing valid follows
//! the damaged spot, it is the torn tail of the last write before a crash (or preallocated
//! zeros): the reader stops there and reports it in [`TailReport`]. If a valid fragment
//! follows, bytes the writer had finished were lost: that is corruption, and the reader
//! returns `Error::Corruption` with the file and offset.

use std::path::Path;

use super::format::{
    checksum_matches_shorter_payload, decode_fragment, FragmentError, Predecessor, RecordType,
    BLOCK_SIZE, HEADER_LEN,
};
use crate::error::{Error, Result};

/// What the reader dropped at the end of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailReport {
    /// Offset of the first dropped byte (the start of the incomplete record).
    pub offset: u64,
    /// Bytes dropped, zeros excluded.
    pub dropped_bytes: u64,
    /// What was wrong at `offset`.
    pub reason: String,
}

/// Iterates over the logical records of a log.
pub struct LogReader<'a> {
    data: &'a [u8],
    path: &'a Path,
    pos: usize,
    /// A fragmented record being assembled, and where it started.
    scratch: Vec<u8>,
    record_start: Option<usize>,
    tail: Option<TailReport>,
    predecessor: Option<Predecessor>,
    /// Where the last record returned (or the predecessor fragment) ends.
    records_end: usize,
}

impl<'a> LogReader<'a> {
    /// Read the log `data`, which came from the file `path` (used in error messages).
    pub fn new(data: &'a [u8], path: &'a Path) -> Self {
        // A WAL that began at a memtable switch starts with a predecessor fragment. Read it
        // now, so the caller knows it before the first record; a damaged one is left to
        // `next_record`, which reports it like any other damage.
        let first = data.get(..BLOCK_SIZE.min(data.len())).unwrap_or(&[]);
        let predecessor = decode_fragment(first)
            .ok()
            .filter(|f| f.kind == RecordType::Predecessor)
            .and_then(|f| Predecessor::decode(f.payload));
        let pos = if predecessor.is_some() {
            HEADER_LEN + Predecessor::ENCODED_LEN
        } else {
            0
        };
        LogReader {
            data,
            path,
            pos,
            scratch: Vec::new(),
            record_start: None,
            tail: None,
            predecessor,
            records_end: pos,
        }
    }

    /// The WAL this one follows, from its first fragment.
    pub fn predecessor(&self) -> Option<Predecessor> {
        self.predecessor
    }

    /// The offset just past the last record returned so far: the length the log had when
    /// that record was written.
    pub fn records_end(&self) -> u64 {
        self.records_end as u64
    }

    /// The torn tail dropped at the end, if the reader reached one.
    pub fn tail(&self) -> Option<&TailReport> {
        self.tail.as_ref()
    }

    /// The next logical record and its offset, `None` at the end of the log.
    ///
    /// # Errors
    /// `Error::Corruption` when damage is followed by valid records.
    pub fn next_record(&mut self) -> Result<Option<(u64, &[u8])>> {
        loop {
            if self.pos >= self.data.len() {
                if let Some(start) = self.record_start {
                    // Nothing can follow the end of the file, so this is a torn tail. (Looking
                    // for valid fragments after `start` would find this record's own.)
                    let end = self.data.len();
                    return self.damage(start, end, "record cut short by end of file");
                }
                return Ok(None);
            }
            let block_end = (self.pos / BLOCK_SIZE + 1) * BLOCK_SIZE;
            let room = block_end - self.pos;
            let rest = self
                .data
                .get(self.pos..block_end.min(self.data.len()))
                .unwrap_or(&[]);
            if room < HEADER_LEN {
                if rest.iter().any(|&b| b != 0) {
                    return self.damage(self.pos, self.pos, "non-zero block padding");
                }
                self.pos = block_end;
                continue;
            }
            let at = self.pos;
            let fragment = match decode_fragment(rest) {
                Ok(f) => f,
                Err(e) => return self.bad_fragment(e, at, block_end, rest),
            };
            self.pos += HEADER_LEN + fragment.payload.len();
            match (fragment.kind, self.record_start) {
                (RecordType::Full, None) => {
                    self.records_end = self.pos;
                    let payload = fragment.payload;
                    return Ok(Some((at as u64, payload)));
                }
                (RecordType::First, None) => {
                    self.scratch.clear();
                    self.scratch.extend_from_slice(fragment.payload);
                    self.record_start = Some(at);
                }
                (RecordType::Middle, Some(_)) => self.scratch.extend_from_slice(fragment.payload),
                (RecordType::Last, Some(start)) => {
                    self.scratch.extend_from_slice(fragment.payload);
                    self.record_start = None;
                    self.records_end = self.pos;
                    return Ok(Some((start as u64, &self.scratch)));
                }
                (RecordType::Full | RecordType::First, Some(start)) => {
                    return self.damage(start, at, "record interrupted by a new record");
                }
                (RecordType::Middle | RecordType::Last, None) => {
                    return self.damage(at, at, "continuation fragment without a first");
                }
                (RecordType::Predecessor, _) => {
                    // A well-formed one at the start was consumed by `new`.
                    return self.damage(at, at, "misplaced or malformed predecessor fragment");
                }
                (RecordType::Zero, _) => return self.damage(at, at, "zero fragment type"),
            }
        }
    }

    /// What the fragment at `at` that did not decode, `rest` the bytes from it to the end
    /// of its block (or of the file, before `block_end`), means: damage, or a torn tail.
    fn bad_fragment(
        &mut self,
        e: FragmentError,
        at: usize,
        block_end: usize,
        rest: &[u8],
    ) -> Result<Option<(u64, &[u8])>> {
        match e {
            FragmentError::Zero => self.damage(at, at, "zero bytes"),
            FragmentError::Truncated if block_end <= self.data.len() => {
                self.damage(at, at, "fragment length exceeds its block")
            }
            FragmentError::Truncated => {
                let why = "fragment cut short by end of file";
                if checksum_matches_shorter_payload(rest) {
                    // A finished fragment with a damaged length: what follows it counts.
                    return self.damage(at, at, why);
                }
                // The write this header began never finished, so everything after it is
                // its payload, even bytes that look like fragments (a log stored in a
                // value): a torn tail, whatever follows.
                let start = self.record_start.unwrap_or(at);
                Ok(self.drop_tail(start, why))
            }
            FragmentError::Bad(why) => self.damage(at, at, why),
        }
    }

    /// Damage found at `at`, inside a record that began at `record_start`.
    fn damage(
        &mut self,
        record_start: usize,
        at: usize,
        reason: &str,
    ) -> Result<Option<(u64, &[u8])>> {
        if self.valid_fragment_after(at) {
            return Err(Error::corruption(self.path, at as u64, reason));
        }
        Ok(self.drop_tail(record_start, reason))
    }

    /// End the log at `record_start`, reporting the non-zero bytes dropped.
    fn drop_tail<T>(&mut self, record_start: usize, reason: &str) -> Option<T> {
        let dropped = self
            .data
            .get(record_start..)
            .unwrap_or(&[])
            .iter()
            .filter(|&&b| b != 0)
            .count();
        if dropped > 0 {
            self.tail = Some(TailReport {
                offset: record_start as u64,
                dropped_bytes: dropped as u64,
                reason: reason.to_owned(),
            });
        }
        self.pos = self.data.len();
        self.record_start = None;
        None
    }

    /// True if a checksummed fragment starts anywhere after `at`. Only the error path pays
    /// for this scan.
    fn valid_fragment_after(&self, at: usize) -> bool {
        (at + 1..self.data.len()).any(|p| {
            let block_end = (p / BLOCK_SIZE + 1) * BLOCK_SIZE;
            self.data
                .get(p..block_end.min(self.data.len()))
                .is_some_and(|rest| {
                    rest.get(6).is_some_and(|&t| (1..=5).contains(&t))
                        && decode_fragment(rest).is_ok()
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, PosixFs};
    use crate::wal::LogWriter;

    fn write_log(records: &[Vec<u8>]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let mut w = LogWriter::new(PosixFs.create(&path).unwrap());
        for r in records {
            // Split every record in two parts to exercise multi-part payloads.
            let (a, b) = r.split_at(r.len() / 2);
            w.add_record(&[a, b]).unwrap();
        }
        w.sync().unwrap();
        drop(w);
        std::fs::read(&path).unwrap()
    }

    fn read_all(data: &[u8]) -> Result<(Vec<Vec<u8>>, Option<TailReport>)> {
        let path = Path::new("t.log");
        let mut r = LogReader::new(data, path);
        let mut out = Vec::new();
        while let Some((_, rec)) = r.next_record()? {
            out.push(rec.to_vec());
        }
        Ok((out, r.tail().cloned()))
    }

    fn sample_records() -> Vec<Vec<u8>> {
        let mut v = vec![b"one".to_vec(), Vec::new(), vec![7u8; 100]];
        v.push((0..BLOCK_SIZE * 3 + 17).map(|i| (i % 251) as u8).collect());
        v.push(vec![9u8; BLOCK_SIZE - HEADER_LEN - 3]);
        v.push(b"last".to_vec());
        v
    }

    #[test]
    fn round_trip_with_fragments_and_padding() {
        let records = sample_records();
        let data = write_log(&records);
        let (got, tail) = read_all(&data).unwrap();
        assert_eq!(got, records);
        assert_eq!(tail, None);
    }

    #[test]
    fn torn_at_every_offset_of_last_record_keeps_the_ones_before() {
        let records = sample_records();
        let data = write_log(&records);
        let before = write_log(&records[..records.len() - 1]);
        for cut in before.len()..data.len() {
            let (got, _) = read_all(&data[..cut]).unwrap();
            assert_eq!(got, records[..records.len() - 1], "cut at {cut}");
        }
    }

    #[test]
    fn torn_inside_a_fragmented_record_drops_only_it() {
        let records = sample_records();
        let data = write_log(&records[..4]);
        let three = write_log(&records[..3]);
        // Every 97th offset, and every offset near a block boundary: a cut right after a
        // whole middle fragment once read as corruption (found by the wal_reader fuzzer).
        let near_boundaries = (1..=data.len() / BLOCK_SIZE)
            .flat_map(|b| b * BLOCK_SIZE - 8..=b * BLOCK_SIZE + 8)
            .filter(|&cut| cut >= three.len() && cut < data.len());
        for cut in (three.len()..data.len()).step_by(97).chain(near_boundaries) {
            let (got, _) = read_all(&data[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(got, records[..3], "cut at {cut}");
        }
    }

    #[test]
    fn torn_record_holding_a_log_in_its_value_is_a_torn_tail() {
        // A record whose bytes are themselves a valid log (a log stored in a value), cut by
        // a crash: the copy inside it must not read as "valid fragments after the damage"
        // (found by the wal_reader fuzzing campaign).
        let inner = write_log(&[b"inner record".to_vec(), vec![3u8; 40]]);
        let mut value = b"prefix".to_vec();
        value.extend_from_slice(&inner);
        value.extend_from_slice(&[5u8; 64]);
        let records = vec![b"first".to_vec(), value];
        let data = write_log(&records);
        let one = write_log(&records[..1]);
        for cut in one.len()..data.len() {
            let (got, _) = read_all(&data[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(got, records[..1], "cut at {cut}");
        }
    }

    #[test]
    fn damaged_length_in_the_last_block_is_corruption() {
        // The length of a finished fragment grows past the end of the file: the records
        // after it were acknowledged, so this must not read as a torn tail.
        let records = vec![b"alpha".to_vec(), b"beta".to_vec(), b"gamma".to_vec()];
        let data = write_log(&records);
        let mut bad = data.clone();
        bad[4..6].copy_from_slice(&u16::MAX.to_le_bytes());
        match read_all(&bad) {
            Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 0),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn trailing_zeros_are_the_end() {
        let records = sample_records();
        let mut data = write_log(&records);
        data.resize(data.len() + 5000, 0);
        let (got, tail) = read_all(&data).unwrap();
        assert_eq!(got, records);
        assert_eq!(tail, None, "zeros are not reported as a torn tail");
    }

    #[test]
    fn damage_before_valid_records_is_corruption_with_offset() {
        let records = sample_records();
        let data = write_log(&records);
        for i in [0usize, 5, 10, 20, 40] {
            let mut bad = data.clone();
            bad[i] ^= 0x01;
            match read_all(&bad) {
                Err(Error::Corruption { offset, .. }) => assert!(offset <= i as u64),
                other => panic!("flip at {i}: expected corruption, got {other:?}"),
            }
        }
    }

    #[test]
    fn every_flip_is_detected_or_harmless() {
        let records = vec![b"alpha".to_vec(), b"beta".to_vec(), b"gamma".to_vec()];
        let data = write_log(&records);
        for i in 0..data.len() {
            let mut bad = data.clone();
            bad[i] ^= 0x10;
            match read_all(&bad) {
                Err(e) => assert!(e.is_corruption()),
                // A flip in the last record's bytes makes it a torn tail: the records
                // returned must still be a prefix of what was written.
                Ok((got, _)) => assert_eq!(got, records[..got.len()], "flip at {i}"),
            }
        }
    }

    /// A WAL names the one before it in front of its first record; a WAL that never got a
    /// record stays empty, and the WAL after it names what the empty one would have named.
    #[test]
    fn a_wal_names_its_predecessor_and_an_empty_one_passes_the_link_on() {
        use crate::fs::MemFs;
        let fs = MemFs::new();
        let dir = Path::new("/wal");
        fs.create_dir_all(dir).unwrap();
        let log = |n: u64| crate::filename::wal_path(dir, crate::version::FileId(n));
        let mut first = LogWriter::new(fs.create_log(&log(5)).unwrap());
        first.add_record(&[b"one"]).unwrap();
        // The WAL is off while WAL 6 is current: it stays empty.
        let second = LogWriter::following(fs.create_log(&log(6)).unwrap(), &first, 5);
        let mut third = LogWriter::following(fs.create_log(&log(7)).unwrap(), &second, 6);
        assert!(second.is_empty() && third.is_empty());
        third.add_record(&[b"two"]).unwrap();
        drop((first, second, third));

        let named = Predecessor { wal: 5, length: 10 };
        assert_eq!(fs.read_all(&log(5)).unwrap().len() as u64, named.length);
        assert!(fs.read_all(&log(6)).unwrap().is_empty());
        let path = log(7);
        let data = fs.read_all(&path).unwrap();
        let mut r = LogReader::new(&data, &path);
        assert_eq!(r.predecessor(), Some(named));
        assert_eq!(r.next_record().unwrap().unwrap(), (23, &b"two"[..]));
        assert_eq!(r.records_end(), data.len() as u64);
    }
}
