//! The graph checkpoint: the HNSW graph written whole to `GRAPH` in the index's
//! directory (format: docs/format.md section 9), and read back at open.
//!
//! A checkpoint replaces the previous one atomically: the graph goes to `GRAPH.tmp`, which
//! is synced, renamed over `GRAPH`, and the directory synced, so a crash at any point leaves
//! one whole checkpoint, the new or the old. The checkpoint is derived data: a missing or
//! damaged one only means the graph is rebuilt from the stored vectors.

use std::path::Path;

use crate::vector::Hnsw;
use shale::error::{Error, Result};
use shale::fs::{FileSystem, WritableFile};

/// The graph checkpoint in the vector store's directory.
const GRAPH_FILE: &str = "GRAPH";
const GRAPH_TEMP: &str = "GRAPH.tmp";

/// True if `name` is one of the checkpoint's files.
pub(super) fn owns(name: &str) -> bool {
    name == GRAPH_FILE || name == GRAPH_TEMP
}

/// What the directory holds.
pub(super) enum Checkpoint {
    Missing,
    Found(Box<Hnsw>),
    /// Present but unreadable; the error is not kept, since the graph is rebuilt anyway.
    Damaged,
}

/// Read the checkpoint of `dir`.
pub(super) fn read(fs: &dyn FileSystem, dir: &Path) -> Checkpoint {
    let path = dir.join(GRAPH_FILE);
    if !fs.exists(&path) {
        return Checkpoint::Missing;
    }
    match fs
        .read_all(&path)
        .and_then(|bytes| Hnsw::read_from(&bytes, &path))
    {
        Ok(graph) => Checkpoint::Found(Box::new(graph)),
        Err(_) => Checkpoint::Damaged,
    }
}

/// Replace the checkpoint of `dir` with `graph`.
///
/// # Errors
/// `Io` from any step; the old checkpoint is then still in place.
pub(super) fn write(fs: &dyn FileSystem, dir: &Path, graph: &Hnsw) -> Result<()> {
    let temp = dir.join(GRAPH_TEMP);
    shale::fs::replace_file(fs, dir, GRAPH_FILE, GRAPH_TEMP, |file| {
        let mut out = WriteAdapter { file, error: None };
        let written = graph.write_to(&mut out);
        if let Some(e) = out.error.take() {
            return Err(e);
        }
        written.map_err(|e| Error::io("write", &temp, e))
    })
}

/// Delete the checkpoint of `dir`, if any, durably.
///
/// # Errors
/// `Io` from the delete or the directory sync.
pub(super) fn remove(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    shale::fs::remove_durably(fs, dir, GRAPH_FILE)
}

/// `std::io::Write` over a [`WritableFile`], keeping the engine's error.
struct WriteAdapter<'a> {
    file: &'a mut dyn WritableFile,
    error: Option<Error>,
}

impl std::io::Write for WriteAdapter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.file.append(buf) {
            Ok(()) => Ok(buf.len()),
            Err(e) => {
                self.error = Some(e);
                Err(std::io::Error::other("append failed"))
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
