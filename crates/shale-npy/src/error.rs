//! What is wrong with a `.npy` file: one error for the reader and the writer.

use std::fmt;

/// What is wrong with a `.npy` file.
#[derive(Debug)]
#[non_exhaustive]
pub enum NpyError {
    /// Reading or writing the file failed.
    Io(std::io::Error),
    /// It does not start with the `.npy` magic bytes.
    NotNpy,
    /// A format version other than 1.0, 2.0 or 3.0.
    Version(u8, u8),
    /// The header ends early, is too long, or is not the dict NumPy writes.
    Header(String),
    /// An element type (its `descr`) other than those wanted, which `want` names.
    Dtype { descr: String, want: &'static str },
    /// An array of a shape that is not wanted here.
    Shape { shape: Vec<u64>, need: &'static str },
    /// The data is not as long as the shape says.
    Size { want: u64, have: u64 },
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpyError::Io(e) => write!(f, "{e}"),
            NpyError::NotNpy => write!(f, "not a .npy file (no \\x93NUMPY magic)"),
            NpyError::Version(major, minor) => {
                write!(
                    f,
                    ".npy format version {major}.{minor} is not supported (1.0 to 3.0)"
                )
            }
            NpyError::Header(why) => write!(f, "bad .npy header: {why}"),
            NpyError::Dtype { descr, want } => write!(f, "dtype {descr} is not supported: {want}"),
            NpyError::Shape { shape, need } => {
                write!(f, "an array of shape {}; need {need}", shape_text(shape))
            }
            NpyError::Size { want, have } => write!(
                f,
                "the data is {have} bytes, but the header's shape and dtype need {want}"
            ),
        }
    }
}

impl std::error::Error for NpyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NpyError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for NpyError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            // read_exact's "failed to fill whole buffer": the file ends inside the header.
            std::io::ErrorKind::UnexpectedEof => NpyError::Header("the file ends early".into()),
            _ => NpyError::Io(e),
        }
    }
}

/// A shape as Python prints it: `(3, 4)`, `(4,)`.
pub(crate) fn shape_text(shape: &[u64]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}
