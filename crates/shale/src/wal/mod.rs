//! The log: the record framing shared by the WAL and the MANIFEST.
//!
//! A log file is a sequence of 32 KiB blocks; a logical record is split into fragments
//! that never cross a block boundary (LevelDB's `doc/log_format.md`). Every fragment
//! carries a masked CRC32C. The reader tells a *torn tail* (damage after which the file
//! holds nothing valid: the last write of a crash) from *corruption* (damage followed by
//! valid records), and only the first is dropped silently.
//!
//! Threading: a [`LogWriter`] is owned by one thread at a time (the write-group leader for
//! the WAL, the holder of the version-set lock for the manifest). [`LogReader`] works on an
//! in-memory copy of the file.

pub(crate) mod format;
mod reader;
mod writer;

pub use format::{Predecessor, RecordType, HEADER_LEN};
pub use reader::{LogReader, TailReport};
pub use writer::LogWriter;
