use super::cache::CACHE_BYTES;
use super::*;
use openraft::{CommittedLeaderId, EntryPayload};

fn blank(index: u64) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Blank,
    }
}

fn open() -> (tempfile::TempDir, LogStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = LogStore::open(dir.path(), Options::default()).expect("open");
    (dir, store)
}

fn put_all(store: &LogStore, entries: Vec<Entry>) -> Result<()> {
    let (batch, appended) = store.append_batch(entries)?;
    store.db.write(batch, WriteOptions::sync())?;
    store.cache().push(appended);
    Ok(())
}

/// openraft purges a follower's log before the snapshot it installs is durable; the
/// store holds the purge until the state machine says a durable snapshot covers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_waits_for_a_durable_snapshot_that_covers_it() {
    let (_dir, store) = open();
    put_all(&store, (1..=10).map(blank).collect()).expect("append");
    let (covered, snapshots) = tokio::sync::watch::channel(3u64);
    let mut store = store.purging_behind(snapshots);
    let mut purging = store.clone();
    let purge = tokio::spawn(async move { purging.purge(blank(8).log_id).await });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        store.last_purged().expect("read"),
        None,
        "purged past the snapshot"
    );
    covered.send_replace(8);
    purge.await.expect("task").expect("purge");
    assert_eq!(store.last_purged().expect("read"), Some(blank(8).log_id));
    // A purge the snapshot already covers does not wait.
    store.purge(blank(3).log_id).await.expect("purge behind");
}

#[test]
fn an_append_that_skips_an_index_is_refused() {
    let (_dir, store) = open();
    put_all(&store, (1..=3).map(blank).collect()).expect("contiguous");
    let err = put_all(&store, vec![blank(5)]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LogHole {
                expected: 4,
                found: 5
            }
        ),
        "{err}"
    );
    let err = put_all(&store, vec![blank(4), blank(6)]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LogHole {
                expected: 5,
                found: 6
            }
        ),
        "{err}"
    );
    assert_eq!(store.entries(0, None).expect("read").len(), 3);
}

/// The store as a restarted node finds it: the same disk, an empty cache.
fn cold(store: &LogStore) -> LogStore {
    LogStore {
        db: Arc::clone(&store.db),
        keys: store.keys,
        cache: Arc::default(),
        snapshots: None,
        purge_waits: Arc::default(),
        cluster: Arc::default(),
        joining: Arc::default(),
        vote_writes: store.vote_writes,
        appended: Arc::default(),
    }
}

#[test]
fn a_store_is_claimed_by_one_node_and_joins_one_cluster() {
    let (dir, store) = open();
    let id = store.claim(1).expect("a new store is claimed");
    assert_eq!(
        (id.node_id, id.layout, id.cluster),
        (1, format::DATA_LAYOUT, None)
    );
    store.join_cluster(7).expect("join");
    store.join_cluster(7).expect("joining again is nothing");
    assert!(store.join_cluster(8).is_err(), "another cluster");
    store.close().expect("close");
    let again = LogStore::open(dir.path(), Options::default()).expect("reopen");
    let err = again.claim(2).expect_err("node 1's data");
    assert!(err.to_string().contains("belongs to node 1"), "{err}");
    assert_eq!(again.claim(1).expect("node 1").cluster, Some(7));
    assert_eq!(again.cluster_id(), Some(7));
}

#[test]
fn a_hole_on_disk_is_reported_on_read() {
    let (_dir, warm) = open();
    put_all(&warm, (1..=5).map(blank).collect()).expect("append");
    // Damage the store behind the log's back: remove entry 3.
    warm.db.delete(warm.keys.entry(3)).expect("delete");
    let store = cold(&warm);
    for (start, end) in [(1, None), (3, Some(6))] {
        let err = store.entries(start, end).unwrap_err();
        assert!(
            matches!(
                err,
                Error::LogHole {
                    expected: 3,
                    found: 4
                }
            ),
            "[{start}, {end:?}): {err}"
        );
    }
    assert_eq!(store.entries(4, None).expect("after the hole").len(), 2);
}

#[test]
fn truncate_and_purge_keep_the_run_contiguous() {
    let (_dir, store) = open();
    put_all(&store, (1..=10).map(blank).collect()).expect("append");
    let b = store.purge_batch(&blank(4).log_id).expect("purge");
    store.db.write(b, WriteOptions::sync()).expect("write");
    store
        .check_head(&blank(4).log_id)
        .expect("head follows the purged id");
    let b = store.truncate_batch(8).expect("truncate");
    store.db.write(b, WriteOptions::sync()).expect("write");
    let got: Vec<u64> = store
        .entries(0, None)
        .expect("read")
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(got, vec![5, 6, 7]);
    assert!(
        store.truncate_batch(3).is_err(),
        "truncating into the purged log"
    );
    put_all(&store, vec![blank(8)]).expect("append continues the run");
    assert!(put_all(&store, vec![blank(10)]).is_err());
}

fn put(index: u64, term: u64, value_len: usize) -> Entry {
    let op = crate::Op {
        key: format!("k{index}").into_bytes(),
        value: Some(vec![b'v'; value_len]),
    };
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Arc::new(crate::Command::Write(vec![op]))),
    }
}

/// Every range read from the store equals the same range read from the disk alone.
fn assert_reads_match_the_disk(store: &LogStore, upto: u64) {
    let disk = cold(store);
    for start in 0..=upto + 1 {
        for end in (start..=upto + 2).map(Some).chain([None]) {
            let got = store.entries(start, end).expect("read");
            let want = disk.entries(start, end).expect("disk read");
            let bytes = |v: &[Entry]| v.iter().map(format::encode_entry).collect::<Vec<_>>();
            assert_eq!(bytes(&got), bytes(&want), "[{start}, {end:?})");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entry_cache_follows_appends_truncates_and_purges() {
    let (_dir, mut store) = open();
    put_all(&store, (1..=10).map(|i| put(i, 1, 10)).collect()).expect("append");
    assert_eq!(store.cache().first_index(), Some(1));
    assert_reads_match_the_disk(&store, 10);

    // A new leader overwrites the tail: the cache must not serve the old entries.
    store
        .truncate(LogId::new(CommittedLeaderId::new(1, 1), 7))
        .await
        .expect("truncate");
    assert_reads_match_the_disk(&store, 10);
    assert_eq!(store.cache().end_index(), Some(7));
    put_all(&store, (7..=9).map(|i| put(i, 2, 20)).collect()).expect("append");
    assert_eq!(store.cache().end_index(), Some(10));
    assert_reads_match_the_disk(&store, 10);
    let tail = store.entries(7, None).expect("read");
    assert!(tail.iter().all(|e| e.log_id.leader_id.term == 2));

    store
        .purge(LogId::new(CommittedLeaderId::new(1, 1), 4))
        .await
        .expect("purge");
    assert_eq!(store.cache().first_index(), Some(5));
    assert_reads_match_the_disk(&store, 10);
}

#[test]
fn the_entry_cache_keeps_to_its_budget() {
    let (_dir, store) = open();
    let big = 3 << 20;
    put_all(&store, (1..=20).map(|i| put(i, 1, big)).collect()).expect("append");
    let (first, bytes) = {
        let cache = store.cache();
        (cache.first_index(), cache.bytes)
    };
    assert!(bytes <= CACHE_BYTES, "{bytes} bytes cached");
    assert!(first > Some(1), "the oldest entries left the cache");
    assert_eq!(store.cache().end_index(), Some(21));
    // Reads that reach before the cache come from the disk, whole.
    let all = store.entries(1, None).expect("read");
    assert_eq!(
        all.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>()
    );
    // An append that does not continue the cached run starts a new one.
    store.cache().push(vec![(put(30, 1, 1), 1)]);
    assert_eq!(store.cache().first_index(), Some(30));
    assert_eq!(store.cache().bytes, 1);
}

fn indexes(store: &LogStore) -> Vec<u64> {
    let entries = store.entries(0, None).expect("read");
    entries.iter().map(|e| e.log_id.index).collect()
}

/// Two groups' logs in one database: what one group writes, truncates and purges is
/// invisible to the other, on a warm view and on a cold one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_groups_of_one_log_database_keep_apart() {
    let (_dir, node) = open();
    let (mut three, mut seven) = (node.group(3), node.group(7));
    assert_eq!((three.group_id(), seven.group_id()), (3, 7));
    put_all(&three, (1..=6).map(|i| put(i, 1, 10)).collect()).expect("group 3");
    put_all(&seven, (1..=9).map(|i| put(i, 2, 10)).collect()).expect("group 7");
    let vote = Vote::new_committed(4, 2);
    seven.save_vote(&vote).await.expect("vote");

    seven
        .truncate(LogId::new(CommittedLeaderId::new(2, 1), 8))
        .await
        .expect("truncate");
    seven
        .purge(LogId::new(CommittedLeaderId::new(2, 1), 3))
        .await
        .expect("purge");
    assert_eq!(indexes(&seven), vec![4, 5, 6, 7]);
    assert_eq!(indexes(&three), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(indexes(&cold(&three)), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(three.last_purged().expect("read"), None);
    assert_eq!(three.read_vote().await.expect("read"), None);
    assert_eq!(seven.read_vote().await.expect("read"), Some(vote));
    assert!(indexes(&node).is_empty(), "group 1 holds nothing");
    assert!(three
        .entries(0, None)
        .expect("read")
        .iter()
        .all(|e| e.log_id.leader_id.term == 1));
    // Each group's run is checked on its own: group 3 continues at 7 whatever group 7 holds.
    put_all(&three, vec![put(7, 1, 10)]).expect("group 3 continues");
    assert!(
        put_all(&seven, vec![put(9, 2, 10)]).is_err(),
        "group 7 is at 8"
    );
}

/// Write the keys of a layout-1 log store (identity `layout`, or none) into `dir`: a vote,
/// a last purged id at 2, entries 3 to 10, as a build before groups left them. With
/// `moved`, entries 3 to 5 are already under group 1, as an upgrade that crashed leaves
/// them.
fn layout_1_store(dir: &Path, layout: Option<u32>, moved: bool) -> Vote<NodeId> {
    let db = Db::open(dir, Options::default()).expect("open");
    let mut batch = WriteBatch::new();
    let vote = Vote::new_committed(3, 1);
    batch.put([0x01], format::encode_vote(&vote));
    batch.put([0x02], format::encode_log_id(&blank(2).log_id));
    for i in 3..=10u64 {
        let key = [&[0x10u8][..], &i.to_be_bytes()].concat();
        let key = match moved && i <= 5 {
            true => LogKeys::of(DEFAULT_GROUP).nest(&key),
            false => key,
        };
        batch.put(key, format::encode_entry(&put(i, 3, 10)));
    }
    if let Some(layout) = layout {
        let id = Identity {
            layout,
            node_id: 1,
            cluster: Some(5),
        };
        batch.put(LOG_KEY_IDENTITY, format::encode_identity(&id));
    }
    db.write(batch, WriteOptions::sync()).expect("write");
    db.close().expect("close");
    vote
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_1_log_moves_under_group_1_at_its_first_start() {
    for (layout, moved) in [(Some(1), false), (Some(1), true), (None, false)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let vote = layout_1_store(dir.path(), layout, moved);
        let mut store = LogStore::open(dir.path(), Options::default()).expect("open");
        let id = store.claim(1).expect("claim");
        let cluster = layout.map(|_| 5);
        assert_eq!(
            (id.layout, id.cluster),
            (DATA_LAYOUT, cluster),
            "{layout:?}"
        );
        assert_eq!(
            indexes(&store),
            (3..=10).collect::<Vec<_>>(),
            "{layout:?} {moved}"
        );
        assert_eq!(store.read_vote().await.expect("vote"), Some(vote));
        assert_eq!(store.last_purged().expect("read"), Some(blank(2).log_id));
        for (start, end) in LAYOUT_1_LOG_RANGES {
            let left = store
                .db
                .range(start.to_vec()..end.to_vec())
                .expect("range")
                .count();
            assert_eq!(left, 0, "layout-1 keys left in [{start:?}, {end:?})");
        }
        assert_eq!(
            store.upgrade_layout_1().expect("again"),
            0,
            "nothing left to move"
        );
        store.close().expect("close");
        let again = LogStore::open(dir.path(), Options::default()).expect("reopen");
        assert_eq!(again.claim(1).expect("claim").layout, DATA_LAYOUT);
        assert_eq!(indexes(&again), (3..=10).collect::<Vec<_>>());
    }
}

#[test]
fn a_store_of_a_later_layout_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    layout_1_store(dir.path(), Some(DATA_LAYOUT + 1), false);
    let store = LogStore::open(dir.path(), Options::default()).expect("open");
    let err = store.claim(1).expect_err("a later layout");
    assert!(err.to_string().contains("reads up to"), "{err}");
}
