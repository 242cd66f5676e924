//! `shale --server`: put, get, del and scan against a one-replica Shale server started in
//! this process, with the same output and exit codes as on a directory.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::shale;
use shale_server::{Client, Server, ServerConfig};

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

    // Refusals: the server's, and what only a directory offers.
    let reserved = run(&["-e", "put", "\\xffx", "v"]);
    assert_eq!(reserved.code, 2);
    assert!(reserved.stderr.contains("reserved"), "{}", reserved.stderr);
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

    rt.block_on(server.shutdown()).unwrap();
}
