//! NumPy `.npy` files of vectors and labels: the one reader and writer that the `shale`
//! binary (`import --format npy`, `search --vector-file`) and `shale-bench` (GloVe vectors,
//! MiniLM vectors, neighbour labels) share.
//!
//! ```text
//!   npy := "\x93NUMPY" major:u8 minor:u8 header_len:(u16 if major = 1 else u32)
//!          header:(Python dict literal, header_len bytes) data
//!   header: {'descr': '<f4', 'fortran_order': False, 'shape': (rows, cols), }
//! ```
//!
//! What is read: arrays of shape `(rows, cols)` (one row per vector) or `(cols,)` (one
//! row), in C (row-major) or Fortran (column-major) order, of `float32` or `float64` read
//! as `f32` rows, or of `uint32` read as `u32` rows, in either byte order ([`Element`]).
//! Rows always come out in row order. What is written: C-order little-endian `float32`.
//!
//! Every length comes from the header and is checked against the bytes there are before
//! anything is read: a truncated or padded file, another dtype or shape is an
//! [`NpyError`], never a panic or a huge allocation.
//!
//! No state is shared: a reader or a write belongs to the thread that holds it.

mod error;
mod format;
mod reader;
mod writer;

pub use error::NpyError;
pub use format::{Dtype, Header};
pub use reader::{read, Array, Element, NpyReader};
pub use writer::{write_f32, write_f32_file};
