//! The CLI's one error type. Each variant becomes one line on stderr and an exit code:
//! 1 for a negative answer (a missing key, a compare-and-set that found another value, a
//! failed `verify`), 2 for everything that went
//! wrong (bad usage, an engine error, unreadable input); clap's own usage errors exit 2 too.

use std::fmt;
use std::path::PathBuf;

/// Exit code of a negative answer: the key is missing, `cas` found another value,
/// `verify` found damage.
pub const EXIT_NEGATIVE: u8 = 1;
/// Exit code of a failure: bad usage, I/O, corruption met while serving a command.
pub const EXIT_FAILURE: u8 = 2;

#[derive(Debug)]
pub enum CliError {
    /// The engine refused or failed; its Display names file and offset for corruption.
    Db(shale::Error),
    /// A file the CLI itself reads or writes (import input, export output).
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Writing to stdout failed (other than a closed pipe, which ends the command quietly).
    Stdout(std::io::Error),
    /// An argument that clap accepted but that does not make sense.
    Usage(String),
    /// A line of an import file that does not parse.
    Input {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    /// A `.npy` file that cannot be read as vectors.
    Npy {
        path: PathBuf,
        error: shale_npy::NpyError,
    },
    /// Vectors (from `what`: a file or `--vector`) of another dimension than the index's.
    Dimension {
        what: String,
        got: usize,
        want: usize,
        index: String,
    },
    /// A row of a `.npy` file (numbered from 0, as NumPy does) that the index cannot hold.
    Row {
        path: PathBuf,
        row: u64,
        reason: String,
    },
    /// A replicated server (`--server`) refused or failed the request, or could not be
    /// reached.
    Server(String),
    /// `get` of a key that is not there.
    NotFound(String),
    /// `cas` found another value than the one expected (printed on stdout), or none
    /// (`missing`), and changed nothing.
    Unchanged { key: String, missing: bool },
    /// `verify` found this many problems (already printed).
    Damaged(usize),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::NotFound(_) | CliError::Unchanged { .. } | CliError::Damaged(_) => {
                EXIT_NEGATIVE
            }
            _ => EXIT_FAILURE,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CliError::Io {
            path: path.into(),
            source,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Db(e) => write!(f, "{e}"),
            CliError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            CliError::Stdout(e) => write!(f, "writing output: {e}"),
            CliError::Usage(msg) => write!(f, "{msg}"),
            CliError::Input { path, line, reason } => {
                write!(f, "{}:{line}: {reason}", path.display())
            }
            CliError::Npy { path, error } => write!(f, "{}: {error}", path.display()),
            CliError::Dimension {
                what,
                got,
                want,
                index,
            } => write!(
                f,
                "{what}: vectors of {got} dimensions, but index {index:?} holds vectors of {want}"
            ),
            CliError::Row { path, row, reason } => {
                write!(f, "{}: row {row}: {reason}", path.display())
            }
            CliError::Server(msg) => write!(f, "server: {msg}"),
            CliError::NotFound(key) => write!(f, "key not found: {key}"),
            CliError::Unchanged { key, missing: true } => {
                write!(f, "not changed: {key} is missing")
            }
            CliError::Unchanged { key, .. } => {
                write!(f, "not changed: {key} holds another value")
            }
            CliError::Damaged(n) => write!(f, "verify found {n} problem(s)"),
        }
    }
}

impl std::error::Error for CliError {}

impl From<shale::Error> for CliError {
    fn from(e: shale::Error) -> Self {
        CliError::Db(e)
    }
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;
