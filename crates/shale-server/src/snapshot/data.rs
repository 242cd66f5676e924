//! The snapshot openraft holds and hands between the stores and the network: an open
//! snapshot file. Reading its frames is [`crate::snapshot`]'s.
//!
//! Thread safety: a `SnapshotData` belongs to one task at a time; each reader duplicates
//! its handle.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The snapshot openraft holds and hands between the stores and the network: an open
/// snapshot file. Reading it goes through [`SnapshotData::frames`], which starts at the
/// beginning whatever was read before.
#[derive(Debug)]
pub struct SnapshotData {
    file: File,
    path: PathBuf,
}

impl SnapshotData {
    /// Open the snapshot file at `path` for reading.
    ///
    /// # Errors
    /// `Io` if it cannot be opened.
    pub fn open(path: &Path) -> Result<SnapshotData> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        Ok(SnapshotData {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The file's path when it was opened (it may have been renamed or replaced since; the
    /// open handle still reads the same bytes).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A new handle on the file, at its start.
    ///
    /// # Errors
    /// `Io` if the handle cannot be duplicated or rewound.
    pub(super) fn rewound(&self) -> Result<File> {
        let mut file = self
            .file
            .try_clone()
            .map_err(|e| Error::io("dup", &self.path, e))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io("seek", &self.path, e))?;
        Ok(file)
    }
}
