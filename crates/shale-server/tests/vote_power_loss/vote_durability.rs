//! The log store on Shale's power-loss file system (`MemFs`): what it acknowledged — the
//! vote, a truncate, a purge — survives a power loss that drops every unsynced byte.
//!
//! Its negative control (one of the two of the unsynced vote; the other is in
//! `cluster_vote_power_loss.rs`): a store that writes the vote without fsync loses it,
//! and the same check must say so.

use std::path::Path;
use std::sync::Arc;

use openraft::storage::RaftLogStorage;
use openraft::{CommittedLeaderId, LogId, Vote};
use shale::fs::{MemFs, PowerLoss};
use shale::{Options, WriteOptions};
use shale_server::log_store::LogStore;
use shale_server::NodeId;

fn on(fs: &MemFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        ..Options::default()
    }
}

const DIR: &str = "/node-1/raft-log";

/// A vote saved, then saved committed, by a store that writes votes with `votes`; then
/// a power loss. The vote saved last, and the one the reopened store reads.
async fn vote_through_a_power_loss(votes: WriteOptions) -> (Vote<NodeId>, Option<Vote<NodeId>>) {
    let mem = MemFs::new();
    let mut store = LogStore::open(Path::new(DIR), on(&mem))
        .expect("open")
        .saving_votes_with(votes);
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
    (vote, reopened.read_vote().await.expect("read vote"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_vote_survives_a_power_loss() {
    let (saved, read) = vote_through_a_power_loss(WriteOptions::sync()).await;
    assert_eq!(
        read,
        Some(saved),
        "a vote acknowledged before the power loss is gone: this replica could vote twice in term 7"
    );
}

/// The negative control: with the vote written without fsync, the check above fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_an_unsynced_vote_is_lost() {
    let (saved, read) = vote_through_a_power_loss(WriteOptions::default()).await;
    assert_ne!(
        read,
        Some(saved),
        "a vote written without fsync survived the power loss: the test above cannot tell \
         a synced vote from an unsynced one"
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
