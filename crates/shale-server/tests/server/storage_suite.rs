//! openraft's storage conformance suite (`openraft::testing::Suite`, 0.9.25) against the
//! Shale log store and state machine, one `#[test]` per case of `Suite::test_store`, each
//! on a fresh pair of stores in a temporary directory. The log store is group 7's view of
//! a log database in which groups 1 and 3 hold votes: a case that saw another group's keys
//! (an initial state with a vote, say) would fail.
//!
//! One case is left out, and checked to fail for its reason:
//! `get_initial_state_membership_from_log_and_sm` applies entries 1 and 2 to the state
//! machine, reads the initial state (which purges the log up to the applied entry 2),
//! then appends entry 1 again, below the purged id, and later entry 3 after entry 1.
//! openraft itself never appends anything but the continuation of the log, and the Shale
//! log store refuses any append that does not continue it (docs/replication.md, "Log
//! store"), so the case ends in `LogHole` at its first append: see the last test.

#![allow(
    clippy::result_large_err,
    reason = "the suite's cases answer openraft's StorageError as they are"
)]

use openraft::storage::RaftLogStorage;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{AnyError, StorageError, StorageIOError};
use shale::Options;
use shale_server::log_store::LogStore;
use shale_server::state_machine::StateMachineStore;
use shale_server::{NodeId, TypeConfig};
use tempfile::TempDir;

struct ShaleStores;

type ShaleSuite = Suite<TypeConfig, LogStore, StateMachineStore, ShaleStores, TempDir>;

fn io(e: &(impl std::error::Error + 'static)) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::write(AnyError::new(e)),
    }
}

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for ShaleStores {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), StorageError<NodeId>> {
        let dir = tempfile::tempdir().map_err(|e| io(&e))?;
        let node =
            LogStore::open(&dir.path().join("raft-log"), Options::default()).map_err(|e| io(&e))?;
        for group in [1, 3] {
            let vote = openraft::Vote::new_committed(9, group);
            node.group(group).save_vote(&vote).await?;
        }
        let log = node.group(7);
        let sm = StateMachineStore::open(&dir.path().join("state"), Options::default())
            .map_err(|e| io(&e))?;
        Ok((dir, log, sm))
    }
}

/// Run one case on a runtime of its own, as the suite's own runner does.
fn run_fut(
    case: impl std::future::Future<Output = Result<(), StorageError<NodeId>>>,
) -> Result<(), StorageError<NodeId>> {
    let runtime = tokio::runtime::Runtime::new().map_err(|e| io(&e))?;
    runtime.block_on(case)
}

macro_rules! suite_cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() -> Result<(), StorageError<NodeId>> {
                run_fut(async {
                    let (_dir, log, sm) = ShaleStores.build().await?;
                    ShaleSuite::$case(log, sm).await
                })
            }
        )*
    };
}

suite_cases!(
    last_membership_in_log_initial,
    last_membership_in_log,
    last_membership_in_log_multi_step,
    get_membership_initial,
    get_membership_from_log_and_empty_sm,
    get_membership_from_empty_log_and_sm,
    get_membership_from_log_le_sm_last_applied,
    get_membership_from_log_gt_sm_last_applied_1,
    get_membership_from_log_gt_sm_last_applied_2,
    get_initial_state_without_init,
    get_initial_state_with_state,
    get_initial_state_last_log_gt_sm,
    get_initial_state_last_log_lt_sm,
    get_initial_state_log_ids,
    get_initial_state_re_apply_committed,
    save_vote,
    get_log_entries,
    limited_get_log_entries,
    try_get_log_entry,
    initial_logs,
    get_log_state,
    get_log_id,
    last_id_in_log,
    last_applied_state,
    purge_logs_upto_0,
    purge_logs_upto_5,
    purge_logs_upto_20,
    delete_logs_since_11,
    delete_logs_since_0,
    append_to_log,
    snapshot_meta,
    apply_single,
    apply_multiple,
);

#[test]
fn transfer_snapshot() -> Result<(), StorageError<NodeId>> {
    run_fut(ShaleSuite::transfer_snapshot(&ShaleStores))
}

#[test]
fn the_case_that_appends_a_hole_fails_on_the_hole() {
    let result = run_fut(async {
        let (_dir, log, sm) = ShaleStores.build().await?;
        ShaleSuite::get_initial_state_membership_from_log_and_sm(log, sm).await
    });
    let err = result.expect_err("the store must refuse to append entry 1 after purging up to 2");
    let text = err.to_string();
    assert!(
        text.contains("raft log hole: expected entry 3, found entry 1"),
        "failed for another reason: {text}"
    );
}
