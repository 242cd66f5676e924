//! The engine's parts below the public API, for the tools that read its files: the CLI's
//! `dump`, `verify` and `stats`, the tests that decode docs/format.md byte by byte, the
//! component benchmarks, and the server's own frames (which reuse the byte encodings).
//!
//! Every item here follows a file format of docs/format.md or is a building block measured
//! on its own; none is needed to use a database. The names are those of the modules that
//! own them, so `shale::inspect::sst::format::Footer` is `sst::format::Footer` inside the
//! crate. Unlike the crate root, this surface changes with the engine.

/// Verification of a directory, a table or a log, and the table-level reads of `dump`.
pub use crate::verify::{
    live_manifest_path, open_table, table_index, table_path, verify_dir, verify_table, IndexEntry,
    Problem, TableCheck, VerifyReport,
};

/// The byte encodings every file kind is made of: fixed-width little-endian integers,
/// varints, length-prefixed bytes, masked CRC32C, and a bounds-checked decoder.
pub mod codec {
    pub use crate::codec::{
        crc32c, crc32c_extend, get_f32s, get_u32, get_u64, mask_crc, put_length_prefixed, put_u16,
        put_u32, put_u64, put_u8, put_varint, unmask_crc, varint_len, DecodeError, Decoder,
        MAX_VARINT_LEN,
    };
}

/// The names of a database directory's files (section 1 of docs/format.md), and the
/// directory `indexes/` under which the search layer keeps each semantic index's store.
pub mod filename {
    pub use crate::filename::{parse, FileKind, INDEXES_DIR};
}

/// Internal keys: a user key, a sequence number and a value kind.
pub mod key {
    pub use crate::key::{encode_internal_key, parse_internal_key, InternalKey, SeqNo, ValueKind};
}

/// The keyspace ids and names that WAL entries and manifest records carry.
pub mod keyspace {
    pub use crate::keyspace::{KeyspaceId, DEFAULT_NAME, MAX_NAME_BYTES};
}

/// A write batch's entries as the WAL stores them.
pub mod batch {
    pub use crate::batch::BatchReader;
}

/// The iterator every internal source (block, table, memtable, merge) implements.
pub mod iter {
    pub use crate::iter::InternalIterator;
}

/// The memtable (an arena entry log, a hash index and sorted runs).
pub mod memtable {
    pub use crate::memtable::MemTable;
}

/// Range tombstones as a table's range-del block stores them.
pub mod range_del {
    pub use crate::range_del::RangeTombstone;
}

/// SSTables: blocks, filters, the footer and the trailers, and the table reader.
pub mod sst {
    pub use crate::sst::{BloomFilter, BloomFilterBuilder, Table, TableProperties};

    /// Data, index and meta blocks with their restart points.
    pub mod block {
        pub use crate::sst::block::{Block, BlockBuilder};
    }

    /// The block codecs.
    pub mod compress {
        pub use crate::sst::compress::{compress, decompress};
    }

    /// The footer, block handles and block trailers.
    pub mod format {
        pub use crate::sst::format::{
            decode_range_dels, decode_trailer, encode_trailer, BlockHandle, CompressionType,
            Footer, BLOCK_TRAILER_LEN, FOOTER_LEN, FORMAT_VERSION, FORMAT_VERSION_RANGE_DELS,
            TABLE_MAGIC,
        };
    }
}

/// The log format shared by the WAL and the manifest.
pub mod wal {
    pub use crate::wal::{LogReader, LogWriter, Predecessor, RecordType, TailReport, HEADER_LEN};
}

/// The manifest: version edits, file metadata, keyspace definitions, `CURRENT`.
pub mod version {
    pub use crate::version::{
        read_current, FileId, FileMeta, KeyspaceDef, Level, RecoveredManifest, VersionEdit,
        NUM_LEVELS,
    };
}
