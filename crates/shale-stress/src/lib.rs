//! Shale's db_stress: the pieces shared by the stress process (`src/main.rs`) and the
//! kill-loop driver (`tests/kill_loop.rs`).
//!
//! ```text
//!   driver ──spawn──► shale-stress run ──► Db (tiny buffers, flush/compaction churn)
//!     │                  │ each write: "p tid wid entries" → oracle log → Db::write → "d tid wid"
//!     │◄── "ready" ──────┘
//!     ├── SIGKILL at a random moment
//!     └── parse the oracle log, reopen the Db, check every key (verify.rs), loop
//! ```
//!
//! The oracle lives outside the stress process: an append-only text file written with one
//! `write(2)` per line, so a line the process wrote survives its `SIGKILL`. A write is
//! logged as pending before `Db::write` and as done after it returns `Ok`: a done write must
//! be in the database after the kill (a done write without the WAL only if a later
//! WAL-less write of its thread is); a pending one may be in it or not, all of a batch or
//! none. Values are a function of (key, write id), so the log needs no values and a value
//! read back names the write that produced it.
//!
//! - `workload.rs`: keys, values, options, the random generator, the test embedder.
//! - `oracle.rs`: the log's lines, written and parsed; the expected state.
//! - `verify.rs`: a reopened database checked against the expected state.

pub mod oracle;
pub mod verify;
pub mod workload;
