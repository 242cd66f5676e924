//! `shale --server`: put, get, del, cas, scan, import, define-index and search against a
//! Shale server started in this process, with the same output and exit codes as on a
//! directory; then the cluster's status, a second replica added and removed, and the key
//! space split in two.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::shale;
use shale_client::pb::{DefineIndexRequest, Metric, Model};
use shale_client::Client;
use shale_server::{Server, ServerConfig};

#[test]
fn put_get_del_and_scan_speak_to_a_server() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = rt.block_on(async {
        let listen = "127.0.0.1:0".parse().unwrap();
        let server = Server::start(ServerConfig::new(1, listen, dir.path().join("node-1")))
            .await
            .unwrap();
        let members = BTreeMap::from([(1, server.addr().to_string())]);
        server.bootstrap(members).await.unwrap();
        server
            .raft()
            .wait(Some(Duration::from_secs(10)))
            .current_leader(1, "node 1 leads")
            .await
            .unwrap();
        server
    });
    let addr = server.addr().to_string();
    let run = |args: &[&str]| {
        let mut full = vec!["--server", addr.as_str()];
        full.extend_from_slice(args);
        shale(&full)
    };

    run(&["put", "apple", "red"]).ok();
    run(&["put", "pear", "green"]).ok();
    assert_eq!(run(&["get", "apple"]).ok(), "red\n");
    assert_eq!(
        run(&["get", "pear", "apple", "--json"]).ok(),
        "{\"key\":\"pear\",\"value\":\"green\"}\n{\"key\":\"apple\",\"value\":\"red\"}\n"
    );
    run(&["del", "apple"]).ok();
    let missing = run(&["get", "apple"]);
    assert_eq!(missing.code, 1);
    assert_eq!(missing.stderr, "shale: key not found: apple\n");

    // More pairs than one scan call returns: the pages are stitched together in order.
    let pairs: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..2500)
        .map(|i| (format!("k{i:05}").into_bytes(), Some(b"v".to_vec())))
        .collect();
    rt.block_on(async {
        let client = Client::new(vec![addr.clone()], None).unwrap();
        client.batch(&pairs).await.unwrap();
    });
    let all = run(&["scan", "--prefix", "k"]).ok();
    let want: String = (0..2500).map(|i| format!("k{i:05}\tv\n")).collect();
    assert_eq!(all, want);
    assert_eq!(
        run(&["scan", "--from", "k01000", "--limit", "2"]).ok(),
        "k01000\tv\nk01001\tv\n"
    );
    assert_eq!(run(&["scan", "--from", "p"]).ok(), "pear\tgreen\n");

    // Import: batches of at most --batch-bytes, each one atomic write to the cluster.
    let tsv = dir.path().join("fruit.tsv");
    let lines: String = (0..300)
        .map(|i| format!("fruit/{i:03}\tripe {i}\n"))
        .collect();
    std::fs::write(&tsv, lines).unwrap();
    let tsv = tsv.to_str().unwrap();
    run(&["import", tsv, "--format", "tsv", "--batch-bytes", "1000"]).ok();
    let imported = run(&["scan", "--prefix", "fruit/"]).ok();
    assert_eq!(imported.lines().count(), 300);
    assert!(imported.starts_with("fruit/000\tripe 0\n"), "{imported}");
    let npy = run(&["import", tsv, "--format", "npy"]);
    assert_eq!(npy.code, 2, "{}", npy.stderr);

    // Search: an index with a model (word hashing) and one of vectors, defined through the
    // Rust client, filled and searched through the CLI.
    rt.block_on(async {
        let client = Client::new(vec![addr.clone()], None).unwrap();
        client
            .define_index_with(DefineIndexRequest {
                name: "notes".into(),
                prefix: b"n/".to_vec(),
                dim: 128,
                metric: Metric::Cosine.into(),
                model: Model::Hash.into(),
                ..Default::default()
            })
            .await
            .unwrap();
    });
    // The index of vectors is defined through the CLI.
    run(&[
        "--index",
        "vecs",
        "--index-prefix",
        "v/",
        "--embedder",
        "none",
        "--dim",
        "2",
        "--metric",
        "l2",
        "define-index",
    ])
    .ok();
    let no_prefix = run(&["--index", "other", "define-index"]);
    assert_eq!(no_prefix.code, 2, "{}", no_prefix.stderr);
    rt.block_on(async {
        let client = Client::new(vec![addr.clone()], None).unwrap();
        for (i, v) in [[0.0f32, 0.0], [1.0, 1.0], [5.0, 5.0]].iter().enumerate() {
            let value = shale_search::semantic::vector_value(v, format!("p{i}").as_bytes());
            client
                .put(format!("v/{i}").as_bytes(), &value)
                .await
                .unwrap();
        }
    });
    run(&["put", "n/1", "the cat sleeps on the mat"]).ok();
    run(&["put", "n/2", "bread with rye flour"]).ok();
    let hits = run(&["--index", "notes", "search", "a sleeping cat", "-k", "1"]).ok();
    assert!(
        hits.starts_with("1\t") && hits.contains("\tn/1\tthe cat sleeps"),
        "{hits}"
    );
    let hits = run(&[
        "--index",
        "vecs",
        "search",
        "--vector",
        "[4.5, 4.5]",
        "-k",
        "2",
        "--exact",
    ])
    .ok();
    let keys: Vec<&str> = hits.lines().filter_map(|l| l.split('\t').nth(2)).collect();
    assert_eq!(keys, ["v/2", "v/1"], "{hits}");
    // Keywords and hybrid: an index with a keyword index, defined through the CLI.
    run(&[
        "--index",
        "wiki",
        "--index-prefix",
        "w/",
        "--embedder",
        "hash",
        "define-text-index",
        "--analyzer",
        "english",
    ])
    .ok();
    run(&["put", "w/1", "ENOSPC: no space left on device"]).ok();
    run(&["put", "w/2", "the disk is full of old photographs"]).ok();
    let hits = run(&["--index", "wiki", "search", "--keyword", "enospc"]).ok();
    let keys: Vec<&str> = hits.lines().filter_map(|l| l.split('\t').nth(2)).collect();
    assert_eq!(keys, ["w/1"], "{hits}");
    let hits = run(&[
        "--index",
        "wiki",
        "search",
        "--hybrid",
        "full disk",
        "-k",
        "2",
    ])
    .ok();
    assert!(
        hits.starts_with("1\t") && hits.contains("\tw/2\t"),
        "{hits}"
    );
    run(&["del", "w/1"]).ok();
    assert_eq!(
        run(&["--index", "wiki", "search", "--keyword", "enospc"]).ok(),
        ""
    );
    let no_keywords = run(&["--index", "notes", "search", "--keyword", "cat"]);
    assert_ne!(no_keywords.code, 0, "{}", no_keywords.stdout);
    let highlight = run(&[
        "--index",
        "wiki",
        "search",
        "--keyword",
        "disk",
        "--highlight",
    ]);
    assert_eq!(highlight.code, 2, "{}", highlight.stderr);
    let text_put_under_vectors = run(&["put", "v/9", "text"]);
    assert_eq!(
        text_put_under_vectors.code, 2,
        "{}",
        text_put_under_vectors.stderr
    );

    // Compare-and-set: it swaps only on the expected value; otherwise it exits 1 and prints
    // the value the key holds (nothing for a missing key).
    run(&["cas", "pear", "yellow", "--expect", "green"]).ok();
    assert_eq!(run(&["get", "pear"]).ok(), "yellow\n");
    let lost = run(&["cas", "pear", "blue", "--expect", "green"]);
    assert_eq!(
        (lost.code, lost.stdout.as_str()),
        (1, "yellow\n"),
        "{}",
        lost.stderr
    );
    run(&["cas", "plum", "purple", "--expect-absent"]).ok();
    run(&["cas", "plum", "--delete", "--expect", "purple"]).ok();
    let gone = run(&["cas", "plum", "red", "--expect", "purple"]);
    assert_eq!(
        (gone.code, gone.stdout.as_str()),
        (1, ""),
        "{}",
        gone.stderr
    );
    assert_eq!(gone.stderr, "shale: not changed: plum is missing\n");

    // The cluster's status, and a second replica added as a learner, made a voter and
    // removed again.
    let status = run(&["cluster-status"]).ok();
    assert!(
        status.starts_with(&format!("{addr}\tnode=1\tleader=1\tapplied=")),
        "{status}"
    );
    assert_eq!(
        run(&["shards"]).ok(),
        format!("group=1\tstart=\tend=end\tversion=0\tleader={addr}\n")
    );
    let second = rt.block_on(async {
        let listen = "127.0.0.1:0".parse().unwrap();
        Server::start(ServerConfig::new(2, listen, dir.path().join("node-2")))
            .await
            .unwrap()
    });
    let addr2 = second.addr().to_string();
    let learner = run(&["add-learner", "2", &addr2]).ok();
    assert!(learner.contains("\tvoters=1\tlearners=2\n"), "{learner}");
    let voters = run(&["add-voters", "2"]).ok();
    assert!(voters.contains("\tvoters=1,2\tlearners=\n"), "{voters}");
    assert_eq!(run(&["get", "pear"]).ok(), "yellow\n");
    let removed = run(&["remove-voters", "2"]).ok();
    assert!(removed.contains("\tvoters=1\t"), "{removed}");
    rt.block_on(second.shutdown()).unwrap();

    // An online backup to a file (restored by tests/server/cluster_backup.rs of the server).
    let file = dir.path().join("backup.snap");
    let backup = run(&["backup", file.to_str().unwrap()]).ok();
    let size = std::fs::metadata(&file).unwrap().len();
    assert_eq!(
        backup,
        format!("backup of {size} bytes in {}\n", file.display())
    );

    // Refusals: the server's, and what only a directory offers.
    let reserved = run(&["-e", "put", "\\xffx", "v"]);
    assert_eq!(reserved.code, 2);
    assert!(reserved.stderr.contains("reserved"), "{}", reserved.stderr);
    let local = shale(&[
        "--db",
        dir.path().join("local").to_str().unwrap(),
        "cluster-status",
    ]);
    assert_eq!(local.code, 2, "{}", local.stderr);
    for args in [
        &["flush"][..],
        &["scan", "--reverse"],
        &["del-range", "a", "b"],
    ] {
        let r = run(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
    }
    let both = shale(&["--db", "/nonexistent", "--server", &addr, "get", "pear"]);
    assert_eq!(both.code, 2, "{}", both.stderr);

    // The key space split at `m`: group 2 serves `pear` from now on.
    assert_eq!(
        run(&["split", "--group", "1", "--at", "m", "--child", "2"]).ok(),
        "group=1\tstart=\tend=m\tversion=1\ngroup=2\tstart=m\tend=end\tversion=1\n"
    );
    assert_eq!(run(&["get", "pear"]).ok(), "yellow\n");
    let shards = run(&["shards"]).ok();
    assert!(
        shards.contains("group=2\tstart=m\tend=end\tversion=1"),
        "{shards}"
    );
    let again = run(&["split", "--group", "1", "--at", "z", "--child", "2"]);
    assert_eq!(again.code, 2, "{}", again.stderr);

    rt.block_on(server.shutdown()).unwrap();
}
