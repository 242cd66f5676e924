//! The log store on Shale's power-loss file system (`MemFs`): what it acknowledged — the
//! vote, a truncate, a purge — survives a power loss that drops every unsynced byte.
//!
//! This is also one check behind the second negative control (the other is
//! tests/vote_power_loss/cluster_vote_power_loss.rs): built with the feature
//! `negative-control-unsynced-vote`, the vote is written without fsync and the first test
//! here must fail (scripts/chaos.sh runs it so and requires the failure).

use std::path::Path;
use std::sync::Arc;

use openraft::storage::RaftLogStorage;
use openraft::{CommittedLeaderId, LogId, Vote};
use shale::fs::{MemFs, PowerLoss};
use shale::Options;
use shale_server::log_store::LogStore;

fn on(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

const DIR: &str = "/node-1/raft-log";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_vote_survives_a_power_loss() {
    let mem = MemFs::new();
    let mut store = LogStore::open(Path::new(DIR), on(&mem)).expect("open");
    let mut vote = Vote::new(7, 2);
    store.save_vote(&vote).await.expect("save vote");
    vote.commit();
    store
        .save_vote(&vote)
        .await
        .expect("save the committed vote");

    let after = mem.power_loss(PowerLoss::default());
    drop(store);
    let mut reopened = LogStore::open(Path::new(DIR), on(&after)).expect("reopen");
    assert_eq!(
        reopened.read_vote().await.expect("read vote"),
        Some(vote),
        "a vote acknowledged before the power loss is gone: this replica could vote twice in term 7"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_survives_a_power_loss() {
    let mem = MemFs::new();
    let mut store = LogStore::open(Path::new(DIR), on(&mem)).expect("open");
    let upto = LogId::new(CommittedLeaderId::new(3, 1), 40);
    store.purge(upto).await.expect("purge");
    let after = mem.power_loss(PowerLoss::default());
    drop(store);
    let reopened = LogStore::open(Path::new(DIR), on(&after)).expect("reopen");
    assert_eq!(reopened.last_purged().expect("read"), Some(upto));
}
