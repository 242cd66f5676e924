//! The engines under test: the registry that opens one by name.
//!
//! What an engine is and how it is opened live in leaves every engine file uses:
//! [`api`] (the `Engine` trait, `Durability`, `BenchResult`) and [`parity`] (the settings
//! all of them are opened with). Each peer sits behind its cargo feature.

use std::path::Path;

mod api;
#[cfg(feature = "fjall")]
mod fjall;
#[cfg(feature = "leveldb")]
mod leveldb;
mod parity;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
mod shale;

pub use api::{BenchResult, Durability, Engine};
pub use parity::{CompressionChoice, FileReads, Parity};

/// Engines compiled into this binary.
pub fn available() -> Vec<&'static str> {
    let mut v = vec!["shale"];
    if cfg!(feature = "rocksdb") {
        v.push("rocksdb");
    }
    if cfg!(feature = "fjall") {
        v.push("fjall");
    }
    if cfg!(feature = "leveldb") {
        v.push("leveldb");
    }
    if cfg!(feature = "redb") {
        v.push("redb");
    }
    v
}

/// Open engine `name` on the empty directory `dir`.
///
/// # Errors
/// An unknown or not-compiled-in engine, or the engine's own open error.
pub fn open(name: &str, dir: &Path, parity: &Parity) -> BenchResult<Box<dyn Engine>> {
    match name {
        "shale" => Ok(Box::new(shale::ShaleEngine::open(dir, parity)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocksdb::RocksEngine::open(dir, parity)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(fjall::FjallEngine::open(dir, parity)?)),
        #[cfg(feature = "leveldb")]
        "leveldb" => Ok(Box::new(leveldb::LevelDbEngine::open(dir, parity)?)),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(redb::RedbEngine::open(dir, parity)?)),
        other => Err(format!(
            "engine {other:?} is not compiled in (available: {}); build with --features {other}",
            available().join(",")
        )
        .into()),
    }
}
