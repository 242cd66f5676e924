//! Appends logical records to a log file as checksummed fragments.

use super::format::{encode_header, fragment_crc, Predecessor, RecordType, BLOCK_SIZE, HEADER_LEN};
use crate::codec;
use crate::error::Result;
use crate::fs::WritableFile;

/// Writes records to a log. Not shared between threads: the owner serialises appends.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Offset inside the current block.
    block_offset: usize,
    /// The WAL this one follows, written just before the first record: a WAL that never
    /// gets a record (the WAL is off) stays empty.
    predecessor: Option<Predecessor>,
}

impl LogWriter {
    /// Append records to `file`, continuing its block layout from its current length.
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        let block_offset = (file.len() % BLOCK_SIZE as u64) as usize;
        LogWriter {
            file,
            block_offset,
            predecessor: None,
        }
    }

    /// A new WAL that continues the one `previous` wrote as file number `previous_id`.
    pub fn following(file: Box<dyn WritableFile>, previous: &LogWriter, previous_id: u64) -> Self {
        // An empty WAL added nothing to the sequence: link to what it would have linked to.
        let predecessor = if previous.is_empty() {
            previous.predecessor
        } else {
            Some(Predecessor {
                wal: previous_id,
                length: previous.len(),
            })
        };
        LogWriter {
            predecessor,
            ..LogWriter::new(file)
        }
    }

    /// Append one logical record whose payload is the concatenation of `parts` (so a
    /// header and a body can be written without first copying them together).
    pub fn add_record(&mut self, parts: &[&[u8]]) -> Result<()> {
        self.add(parts, false)
    }

    /// [`LogWriter::add_record`] for a record that [`LogWriter::sync`] follows before
    /// anything else is appended ([`WritableFile::append_to_sync`]).
    pub fn add_record_to_sync(&mut self, parts: &[&[u8]]) -> Result<()> {
        self.add(parts, true)
    }

    fn put(&mut self, data: &[u8], to_sync: bool) -> Result<()> {
        match to_sync {
            true => self.file.append_to_sync(data),
            false => self.file.append(data),
        }
    }

    fn add(&mut self, parts: &[&[u8]], to_sync: bool) -> Result<()> {
        if let Some(previous) = self.predecessor.take() {
            self.add_predecessor(previous, to_sync)?;
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut cursor = PartsCursor::new(parts);
        let mut left = total;
        let mut first = true;
        loop {
            let room = BLOCK_SIZE - self.block_offset;
            if room < HEADER_LEN {
                // Too little room for a header: pad the block with zeros.
                const ZEROS: [u8; HEADER_LEN] = [0; HEADER_LEN];
                self.put(ZEROS.get(..room).unwrap_or(&[]), to_sync)?;
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_LEN;
            let len = left.min(avail);
            let last = len == left;
            let kind = match (first, last) {
                (true, true) => RecordType::Full,
                (true, false) => RecordType::First,
                (false, true) => RecordType::Last,
                (false, false) => RecordType::Middle,
            };
            // Two passes over the same bytes: one for the checksum, one to append.
            let start = cursor;
            let mut crc = codec::crc32c(&[kind as u8]);
            cursor.for_each(len, |piece| crc = codec::crc32c_extend(crc, piece));
            // `len <= BLOCK_SIZE - HEADER_LEN` < 65536, so it fits the u16 length field.
            let header = encode_header(kind, len as u16, codec::mask_crc(crc));
            self.put(&header, to_sync)?;
            cursor = start;
            let mut result = Ok(());
            cursor.for_each(len, |piece| {
                if result.is_ok() {
                    result = self.put(piece, to_sync);
                }
            });
            result?;
            self.block_offset += HEADER_LEN + len;
            left -= len;
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    /// Begin the log by naming the WAL it follows.
    fn add_predecessor(&mut self, previous: Predecessor, to_sync: bool) -> Result<()> {
        debug_assert!(self.file.is_empty(), "the predecessor goes first");
        let payload = previous.encode();
        let crc = fragment_crc(RecordType::Predecessor, &payload);
        let header = encode_header(RecordType::Predecessor, payload.len() as u16, crc);
        self.put(&header, to_sync)?;
        self.put(&payload, to_sync)?;
        self.block_offset += HEADER_LEN + payload.len();
        Ok(())
    }

    /// Hand buffered bytes to the OS.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Make every record appended so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Bytes in the log so far.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }
}

/// Walks consecutive byte ranges of a list of slices without copying them.
#[derive(Clone, Copy)]
struct PartsCursor<'a> {
    parts: &'a [&'a [u8]],
    index: usize,
    offset: usize,
}

impl<'a> PartsCursor<'a> {
    fn new(parts: &'a [&'a [u8]]) -> Self {
        PartsCursor {
            parts,
            index: 0,
            offset: 0,
        }
    }

    /// Call `f` on the sub-slices that make up the next `n` bytes, and move past them.
    fn for_each(&mut self, mut n: usize, mut f: impl FnMut(&'a [u8])) {
        while n > 0 {
            let Some(part) = self.parts.get(self.index) else {
                return;
            };
            let rest = part.get(self.offset..).unwrap_or(&[]);
            if rest.is_empty() {
                self.index += 1;
                self.offset = 0;
                continue;
            }
            let k = n.min(rest.len());
            f(rest.get(..k).unwrap_or(&[]));
            self.offset += k;
            n -= k;
        }
    }
}
