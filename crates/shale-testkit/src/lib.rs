//! What Shale's tests, benches, examples and demo share: readers of the public data sets
//! they run on, each in one module with one owner instead of one file compiled into
//! several crates by `#[path]`.
//!
//! Not shipped: only the unpublished demo depends on it as a normal dependency; everyone
//! else takes it as a dev-dependency. The helpers around long randomized trials (panic
//! counts, child processes) are the other dev-only crate, `shale-trials`.

pub mod wordnet;
