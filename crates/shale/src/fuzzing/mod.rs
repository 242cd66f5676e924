//! Fuzz entry points: one function per decoder, each taking arbitrary bytes.
//!
//! Every function here states a decoder's contract and panics only if the contract is
//! broken: whatever the bytes, the decoder returns a value or a typed [`Error`] (for file
//! decoders, `Error::Corruption`), and where the engine has an encoder, decoding what it
//! encoded gives back what went in. The cargo-fuzz project in `fuzz/` calls these
//! functions, one target each; `tests/engine/fuzz_smoke.rs` runs them on every `cargo test` over
//! the seeds in `seeds.rs` and mutations of them.
//!
//! Most targets read their first byte as a *mode*: an even mode hands the rest of the
//! bytes to the decoder as they are; an odd mode parses the rest into structured input
//! (entries, records), encodes it with the engine's own encoder, and checks the
//! round trip, and then damages the encoding in ways the input chooses. Checksums stop
//! almost all random bytes at the door, so some modes *re-seal* damaged bytes (recompute
//! the checksums) to reach the decoders behind them.
//!
//! Thread safety: plain functions; each call builds its own in-memory file system.
//! Nothing here is used by the engine itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, BatchReader};
use crate::codec;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, MemFs, PowerLoss};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, user_key, InternalKey, SeqNo, ValueKind};
use crate::options::{Compression, Options, WriteOptions};
use crate::sst::block::{Block, BlockBuilder};
use crate::sst::compress::{compress, decompress};
use crate::sst::format::{
    decode_trailer, encode_trailer, BlockHandle, CompressionType, Footer, BLOCK_TRAILER_LEN,
    FOOTER_LEN,
};
use crate::sst::TableProperties;
use crate::sst::{BloomFilter, BloomFilterBuilder, Table, TableBuilder, TableOptions};
use crate::version::manifest::set_current;
use crate::version::{manifest_name, FileId, FileMeta, Level, RecoveredManifest, VersionEdit};
use crate::wal::{LogReader, LogWriter};
use crate::WriteBatch;

mod db_ops;
pub mod harness;
mod log;
mod seeds;
mod sst;

pub use db_ops::db_ops;
pub use log::{manifest, wal_reader};
pub use seeds::seeds;
pub use sst::{block, sst_footer, sst_table};

/// A fuzz target: takes any bytes, panics only on a broken contract.
pub type Target = fn(&[u8]);

/// Every target, by name: the names of the files in `fuzz/fuzz_targets/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("block", block),
    ("sst_footer", sst_footer),
    ("sst_table", sst_table),
    ("wal_reader", wal_reader),
    ("manifest", manifest),
    ("db_ops", db_ops),
];

/// Reads structured input from fuzz bytes; past the end every read gives zeros, so any
/// byte string is a valid input.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Up to `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// Split `data` into its mode byte and the rest (mode 0 for empty input).
pub fn mode(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&m, rest)) => (m, rest),
        None => (0, data),
    }
}

pub fn fuzz_path(name: &str) -> PathBuf {
    Path::new("fuzz").join(name)
}

/// An empty in-memory file system with the directory of [`fuzz_path`].
fn mem_fs() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("fuzz"))
        .expect("MemFs create_dir_all");
    fs
}

/// The contract of every file decoder: damage is reported as `Corruption`.
pub fn expect_corruption<T>(r: Result<T>, what: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if e.is_corruption() => None,
        Err(e) => panic!("{what}: expected Ok or Corruption, got {e:?}"),
    }
}

/// Distinct internal keys with values parsed from `input`, sorted in internal-key order.
fn entries_from(input: &mut Input<'_>, max: usize) -> Vec<(InternalKey, Vec<u8>)> {
    let mut out = Vec::new();
    while !input.is_empty() && out.len() < max {
        let shape = input.u8();
        let key = input.bytes(usize::from(shape % 12));
        let seq = SeqNo(u64::from(input.u16()));
        let kind = if shape & 0x80 != 0 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let len = usize::from(input.u8() % 48);
        let value = if kind == ValueKind::Put {
            input.bytes(len).to_vec()
        } else {
            Vec::new()
        };
        out.push((InternalKey::new(key, seq, kind), value));
    }
    out.sort_by(|a, b| compare_internal(a.0.encoded(), b.0.encoded()));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

// ---------------------------------------------------------------------------------------
// block
