//! The one error type of the server crate.
//!
//! Split, as the engine's is, by what a caller can do: fix the call (`InvalidArgument`,
//! `Config`), stop and look at the disk (`Corruption`, `LogHole`), retry or fix the
//! environment (`Io`, `Engine`, `Transport`), or give up on this node (`Raft`).

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the replication server.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The Shale engine under a store failed.
    Engine(shale::Error),
    /// Bytes read from a store, a snapshot or the network do not decode.
    Corruption {
        /// What was being decoded: "log entry 17", "snapshot frame 3".
        what: String,
        /// What was wrong, with the offset where known.
        reason: String,
    },
    /// The Raft log is missing an entry between two it holds: a hole that truncate and
    /// purge must never leave.
    LogHole {
        /// The index that should have come next.
        expected: u64,
        /// The index found instead.
        found: u64,
    },
    /// An operating-system call on a server file failed.
    Io {
        /// What was being done, e.g. "rename" or "fsync".
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
    /// The request is refused before it is proposed: a reserved key, a size over the
    /// engine's limits, an empty batch.
    InvalidArgument(String),
    /// The server configuration is wrong; every problem found is listed.
    Config(Vec<String>),
    /// openraft refused or failed (stopped, fatal storage error, initialize refused).
    Raft(String),
    /// gRPC transport: bind, connect, serve.
    Transport(String),
}

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corruption(what: impl Into<String>, reason: impl fmt::Display) -> Error {
        Error::Corruption {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// True for bytes that do not decode and for log holes: damage, not a passing fault.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. } | Error::LogHole { .. })
            || matches!(self, Error::Engine(e) if e.is_corruption())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Engine(e) => write!(f, "engine: {e}"),
            Error::Corruption { what, reason } => write!(f, "corruption in {what}: {reason}"),
            Error::LogHole { expected, found } => write!(
                f,
                "raft log hole: expected entry {expected}, found entry {found}"
            ),
            Error::Io { op, path, source } => write!(f, "{op} {}: {source}", path.display()),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
            Error::Config(problems) => write!(f, "bad configuration: {}", problems.join("; ")),
            Error::Raft(msg) => write!(f, "raft: {msg}"),
            Error::Transport(msg) => write!(f, "transport: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Engine(e) => Some(e),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<shale::Error> for Error {
    fn from(e: shale::Error) -> Error {
        Error::Engine(e)
    }
}
