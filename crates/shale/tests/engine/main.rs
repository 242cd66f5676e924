//! The engine's integration tests, one module per subject, in one test binary: the
//! workspace links one binary where it would link one per file, and the tests of every
//! module share the test threads. One module's tests: `cargo test -p shale --test engine
//! <module>::`.

mod checkpoint;
mod common;
mod compaction;
mod compaction_filter;
mod concurrent_batches;
mod corruption_manifest_tail;
mod crash_power_loss;
mod format_examples;
#[cfg(feature = "fuzzing")]
mod fuzz_smoke;
mod group_commit;
mod io_error_sweep;
mod keyspaces;
mod manifest_roll;
mod model_btreemap;
mod model_long;
mod persistence_kill;
mod put_get_delete_across_flushes;
mod range_delete;
mod range_prefix;
mod read_only;
mod repair;
mod transactions;
mod ttl;
mod wal_salvage;
