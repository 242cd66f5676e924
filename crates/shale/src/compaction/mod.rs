//! Leveled compaction.
//!
//! - `picker/`: the policy, with no I/O: given the files of each level, which files to
//!   merge next and where to. Unit-tested and simulated on its own (`picker/tests.rs`).
//! - `job.rs`: the work: merge the chosen files, drop what no reader can see, write new
//!   SSTables cut at `max_file_size`.
//!
//! `job.rs` asks the user's compaction filter (`crate::compaction_filter`, a policy the
//! options carry) about each key's newest value.

mod job;
mod picker;

pub use job::{run_compaction, CompactionOutput, DropPolicy};
pub use picker::{CompactionPolicy, CompactionTask, InFlight, LevelFile, RunningOutputs};
