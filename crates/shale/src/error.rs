//! The one error type of the library.
//!
//! Variants are split by what a caller can do about them: retry or fix the environment
//! (`Io`), stop and repair (`Corruption`), fix the call (`InvalidArgument`,
//! `InvalidOptions`), or reopen (`Poisoned`, `Closed`). Display is written by hand so that
//! every message carries the numbers a person needs: the file, the offset, the limit.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Shale.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed.
    Io {
        /// What the engine was doing, e.g. "fsync" or "open".
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// Bytes on disk do not decode. `offset` is the byte offset in `file` where the damage
    /// was detected.
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset inside `file`.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// The call itself is wrong: a key too long, a value too large, a bad range.
    InvalidArgument(String),
    /// `Options` failed validation; every problem found is listed.
    InvalidOptions(Vec<String>),
    /// Another handle (possibly in another process) holds the database's lock file.
    Locked(PathBuf),
    /// A background write or an fsync failed earlier; the database refuses writes until it
    /// is reopened, because what is on disk can no longer be trusted to match memory.
    Poisoned(String),
    /// The database was closed.
    Closed,
    /// A transaction's commit found that a key it read or wrote has changed since the
    /// transaction began; nothing was written, and the transaction may be run again.
    Conflict(String),
    /// A layer that derives data from the database failed: for a semantic index, its
    /// embedder failed on an input, panicked or returned unusable vectors. The message
    /// says which; the index refuses searches from then on.
    Index(String),
}

impl Error {
    /// True for damage found in files on disk.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// An `Io` error: `op` on `path` failed with `source`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// A `Corruption` error: `file` is damaged at `offset`, for `reason`.
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// An `InvalidArgument` error saying `msg`.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "I/O error during {op} on {}: {source}", path.display())
            }
            Error::Corruption {
                file,
                offset,
                reason,
            } => write!(
                f,
                "corruption in {} at offset {offset}: {reason}",
                file.display()
            ),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::InvalidOptions(problems) => {
                write!(f, "invalid options: {}", problems.join("; "))
            }
            Error::Locked(path) => write!(
                f,
                "database is locked by another handle or process: {}",
                path.display()
            ),
            Error::Poisoned(why) => write!(
                f,
                "database refuses writes until reopened after an earlier failure: {why}"
            ),
            Error::Closed => write!(f, "database is closed"),
            Error::Conflict(why) => write!(f, "transaction conflict: {why}"),
            Error::Index(why) => write!(f, "index: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_and_offset() {
        let e = Error::corruption("/db/000007.sst", 4096, "block checksum mismatch");
        assert_eq!(
            e.to_string(),
            "corruption in /db/000007.sst at offset 4096: block checksum mismatch"
        );
        assert!(e.is_corruption());
    }
}
