//! Blocks: the unit of I/O, checksumming, compression and caching inside an SSTable. Data
//! blocks and the index block share this format.
//!
//! ```text
//! block   = entry* restart:u32* num_restarts:u32
//! entry   = shared:varint unshared:varint value_len:varint key_delta[unshared] value[value_len]
//! ```
//!
//! Each key is stored as the number of bytes it shares with the previous key plus the rest
//! (prefix compression). Every `restart_interval` entries a *restart point* stores its key
//! whole (`shared = 0`), and its offset is listed in the restart array, so a seek can binary
//! search the restart points and then scan at most one interval. Keys are internal keys in
//! [`crate::key::compare_internal`] order.
//!
//! Thread safety: a [`Block`] is immutable and shared (`Arc`) between threads; a
//! [`BlockIter`] belongs to one thread. Invariant: a `Block` exists only after its restart
//! array was validated; entries are decoded lazily and every decode is bounds-checked.

mod builder;
mod bytes;
mod reader;
mod words;

pub use builder::BlockBuilder;
pub use bytes::{take_buffer, BlockBytes};
pub use reader::{Block, BlockIter};
pub use words::RestartWords;

#[cfg(test)]
mod tests;
