//! A client of a key space split into shards: each request reaches the group whose shard
//! holds its keys (a new client learns the map from its first refusal), a scan reads the
//! shards in key order with every key once, and a batch across shards is refused whole.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{group_leaders, split_in_three, Cluster};
use shale_client::{Client, ClientError};
use shale_server::GroupId;

const GROUPS: [GroupId; 3] = [1, 2, 3];

/// Keys in every shard of [`split_in_three`], the splits themselves included.
fn keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = ["", "a", "b", "h", "m", "p", "q", "z"]
        .iter()
        .flat_map(|p| (0..8).map(move |i| format!("{p}{i}").into_bytes()))
        .collect();
    keys.extend([b"h".to_vec(), b"p".to_vec()]);
    keys.sort();
    keys
}

async fn started() -> (Cluster, Client) {
    let cluster = Cluster::start(3, split_in_three()).await;
    group_leaders(&cluster, &GROUPS).await;
    let client = Client::new(cluster.endpoints(), None).expect("client");
    (cluster, client)
}

/// The user keys group `group` holds on node 1, once they are `want` (within 5 s).
async fn held(cluster: &Cluster, group: GroupId, want: &BTreeSet<Vec<u8>>) -> BTreeSet<Vec<u8>> {
    let start = Instant::now();
    loop {
        let sm = cluster.server(1).groups().get(group).expect("group").sm;
        let keys: BTreeSet<Vec<u8>> = sm
            .db()
            .range(Vec::new()..vec![0xff])
            .expect("range")
            .map(|pair| pair.expect("pair").0)
            .collect();
        if keys == *want || start.elapsed() > Duration::from_secs(5) {
            return keys;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_key_is_written_to_and_read_from_the_group_of_its_shard() {
    let (cluster, client) = started().await;
    // The client starts out believing in one shard: its first write to a key of group 3
    // is refused by group 1 and goes again from the map that refusal led it to fetch.
    client
        .put(b"z9", b"first")
        .await
        .expect("put after a reroute");
    for key in keys() {
        client.put(&key, &key).await.expect("put");
    }
    client.delete(b"m0").await.expect("delete");
    let cas = client
        .compare_and_set(b"q1", Some(b"q1"), Some(b"swapped"))
        .await
        .expect("cas");
    assert!(cas.swapped);
    for key in keys() {
        let want = match key.as_slice() {
            b"m0" => None,
            b"q1" => Some(b"swapped".to_vec()),
            _ => Some(key.clone()),
        };
        assert_eq!(client.get(&key).await.expect("get"), want, "{key:?}");
    }
    let shards = client.shards().await.expect("shard map");
    let ranges: Vec<(GroupId, &[u8])> = shards
        .iter()
        .map(|s| (s.group, s.start.as_slice()))
        .collect();
    assert_eq!(ranges, [(1, &b""[..]), (2, b"h"), (3, b"p")]);
    assert!(shards.iter().all(|s| s.leader_addr.is_some()), "{shards:?}");
    // Every group holds the keys of its shard and no other.
    let mut written: BTreeSet<Vec<u8>> = keys().into_iter().collect();
    written.insert(b"z9".to_vec());
    written.remove(&b"m0"[..]);
    for shard in &shards {
        let want: BTreeSet<Vec<u8>> = written
            .iter()
            .filter(|k| **k >= shard.start && shard.end.as_ref().is_none_or(|e| *k < e))
            .cloned()
            .collect();
        assert_eq!(held(&cluster, shard.group, &want).await, want, "{shard:?}");
    }
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_scan_reads_every_shard_in_key_order_each_key_once() {
    let (cluster, client) = started().await;
    let all = keys();
    for key in &all {
        client.put(key, b"v").await.expect("put");
    }
    // Small pages, their ends falling inside shards and on their ends.
    for page in [1, 7, 8, 1000] {
        let mut seen = Vec::new();
        let mut start = Vec::new();
        loop {
            let (pairs, next) = client.scan(&start, None, page).await.expect("scan");
            assert!(pairs.len() <= page as usize);
            seen.extend(pairs.into_iter().map(|(k, _)| k));
            match next {
                Some(next) => start = next,
                None => break,
            }
        }
        assert_eq!(seen, all, "pages of {page}");
    }
    // One call of the most a page holds crosses every shard.
    let (pairs, next) = client.scan(b"", None, 0).await.expect("scan");
    assert_eq!(pairs.len(), all.len());
    assert_eq!(next, None);
    // A range that starts in one shard and ends inside the next.
    let (pairs, next) = client.scan(b"b3", Some(b"m2"), 0).await.expect("scan");
    let got: Vec<Vec<u8>> = pairs.into_iter().map(|(k, _)| k).collect();
    let want: Vec<Vec<u8>> = all
        .iter()
        .filter(|k| k.as_slice() >= &b"b3"[..] && k.as_slice() < &b"m2"[..])
        .cloned()
        .collect();
    assert_eq!((got, next), (want, None));
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_across_shards_is_refused_and_writes_nothing() {
    let (cluster, client) = started().await;
    let across: Vec<(Vec<u8>, Option<Vec<u8>>)> = [&b"a1"[..], b"i1", b"q1"]
        .iter()
        .map(|k| (k.to_vec(), Some(b"v".to_vec())))
        .collect();
    // The client believes in one shard still: group 1 refuses the whole batch, and the
    // map fetched then shows it spans three.
    let err = client.batch(&across).await.expect_err("across shards");
    assert_eq!(
        err,
        ClientError::CrossShard {
            groups: vec![1, 2, 3]
        }
    );
    assert!(
        err.to_string().contains("nothing of it was applied"),
        "{err}"
    );
    // Now the client knows the map: refused before it is sent.
    let err = client.batch(&across[1..]).await.expect_err("across shards");
    assert_eq!(err, ClientError::CrossShard { groups: vec![2, 3] });
    for (key, _) in &across {
        assert_eq!(client.get(key).await.expect("get"), None, "{key:?}");
    }
    let within = [
        (b"q1".to_vec(), Some(b"1".to_vec())),
        (b"z1".to_vec(), Some(b"2".to_vec())),
    ];
    client
        .batch(&within)
        .await
        .expect("a batch within one shard");
    assert_eq!(client.get(b"z1").await.expect("get"), Some(b"2".to_vec()));

    // What is not built for a split key space yet is refused, not served in part.
    let dir = tempfile::tempdir().expect("tempdir");
    let err = client
        .backup(&dir.path().join("b"))
        .await
        .expect_err("a backup of shards");
    assert!(err.to_string().contains("not built yet"), "{err}");
    cluster.stop_all().await;
}
