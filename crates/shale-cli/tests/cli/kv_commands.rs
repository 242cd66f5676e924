//! put, get, del, cas and scan through the `shale` binary, including binary keys, escaping,
//! ranges, and the exit codes of a missing key and of bad usage.

use crate::common;

use common::{shale, TestDb};

#[test]
fn put_get_del_round_trip() {
    let t = TestDb::new();
    t.run(&["put", "apple", "red"]).ok();
    t.run(&["put", "pear", "green"]).ok();
    assert_eq!(t.run(&["get", "apple"]).ok(), "red\n");
    t.run(&["del", "apple"]).ok();
    let missing = t.run(&["get", "apple"]);
    assert_eq!(missing.code, 1);
    assert_eq!(missing.stdout, "");
    assert_eq!(missing.stderr, "shale: key not found: apple\n");
    assert_eq!(t.run(&["scan"]).ok(), "pear\tgreen\n");
}

#[test]
fn cas_swaps_only_on_the_expected_value() {
    let t = TestDb::new();
    t.run(&["put", "pear", "green"]).ok();
    t.run(&["cas", "pear", "yellow", "--expect", "green"]).ok();
    assert_eq!(t.run(&["get", "pear"]).ok(), "yellow\n");
    // Another value: nothing changes, the value held is printed, exit 1.
    let lost = t.run(&["cas", "pear", "blue", "--expect", "green"]);
    assert_eq!((lost.code, lost.stdout.as_str()), (1, "yellow\n"));
    assert_eq!(
        lost.stderr,
        "shale: not changed: pear holds another value\n"
    );
    assert_eq!(t.run(&["get", "pear"]).ok(), "yellow\n");
    let present = t.run(&["cas", "pear", "x", "--expect-absent"]);
    assert_eq!((present.code, present.stdout.as_str()), (1, "yellow\n"));
    // Missing keys, and deletes.
    t.run(&["cas", "plum", "purple", "--expect-absent"]).ok();
    assert_eq!(t.run(&["get", "plum"]).ok(), "purple\n");
    t.run(&["cas", "plum", "--delete", "--expect", "purple"])
        .ok();
    assert_eq!(t.run(&["get", "plum"]).code, 1);
    let gone = t.run(&["cas", "plum", "red", "--expect", "purple"]);
    assert_eq!((gone.code, gone.stdout.as_str()), (1, ""));
    assert_eq!(gone.stderr, "shale: not changed: plum is missing\n");
    // Escaped bytes on both sides; and usage: one expectation, one outcome.
    t.run(&["-e", "cas", "bin", "\\x00\\xff", "--expect-absent"])
        .ok();
    t.run(&["-e", "cas", "bin", "\\x01", "--expect", "\\x00\\xff"])
        .ok();
    assert_eq!(t.run(&["get", "bin"]).ok(), "\\x01\n");
    for args in [
        &["cas", "k", "v"][..],
        &["cas", "k", "--expect-absent"],
        &["cas", "k", "v", "--delete", "--expect-absent"],
        &["cas", "k", "v", "--expect", "a", "--expect-absent"],
    ] {
        assert_eq!(t.run(args).code, 2, "{args:?}");
    }
}

#[test]
fn del_range_deletes_from_start_up_to_end() {
    let t = TestDb::new();
    for k in ["a", "b1", "b2", "c"] {
        t.run(&["put", k, "v"]).ok();
    }
    t.run(&["del-range", "b", "c"]).ok();
    assert_eq!(t.run(&["scan"]).ok(), "a\tv\nc\tv\n");
    let inverted = t.run(&["del-range", "z", "a"]);
    assert_eq!(inverted.code, 2, "{}", inverted.stderr);
    assert!(
        inverted.stderr.contains("start is after end"),
        "{}",
        inverted.stderr
    );
}

#[test]
fn get_of_several_keys_prints_each_found_one_in_order() {
    let t = TestDb::new();
    t.run(&["put", "apple", "red"]).ok();
    t.run(&["put", "pear", "green"]).ok();
    assert_eq!(
        t.run(&["get", "pear", "apple", "pear"]).ok(),
        "pear\tgreen\napple\tred\npear\tgreen\n"
    );
    let missing = t.run(&["get", "pear", "fig", "kiwi"]);
    assert_eq!(missing.code, 1);
    assert_eq!(missing.stdout, "pear\tgreen\n");
    assert_eq!(missing.stderr, "shale: key not found: fig, kiwi\n");
    assert_eq!(t.run(&["get", "--raw", "pear", "apple"]).code, 2);
}

#[test]
fn binary_keys_and_values_are_escaped_and_round_trip() {
    let t = TestDb::new();
    t.run(&["-e", "put", "k\\x00\\xff", "a\\tb\\nc\\\\d\\x01"])
        .ok();
    t.run(&["put", "caf\u{e9}", "plain \\ text"]).ok();
    let scan = t.run(&["scan"]).ok();
    assert_eq!(
        scan,
        "caf\u{e9}\tplain \\\\ text\nk\\x00\\xff\ta\\tb\\nc\\\\d\\x01\n"
    );
    // Every scan line pasted back with -e finds its value.
    for line in scan.lines() {
        let (key, value) = line.split_once('\t').unwrap();
        assert_eq!(t.run(&["-e", "get", key]).ok(), format!("{value}\n"));
    }
    // --raw writes the exact bytes.
    let raw = std::process::Command::new(env!("CARGO_BIN_EXE_shale"))
        .args([
            "--db",
            t.db.to_str().unwrap(),
            "-e",
            "get",
            "--raw",
            "k\\x00\\xff",
        ])
        .output()
        .unwrap();
    assert_eq!(raw.stdout, b"a\tb\nc\\d\x01");
    // JSON keeps UTF-8 as strings and the rest as hex.
    let json = t.run(&["scan", "--json"]).ok();
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["key"], "caf\u{e9}");
    assert_eq!(rows[1]["key_hex"], "6b00ff");
    assert_eq!(rows[1]["value"], "a\tb\nc\\d\u{1}");
}

#[test]
fn scan_ranges_prefix_reverse_limit() {
    let t = TestDb::new();
    let mut input = String::new();
    for k in ["a1", "a2", "a3", "b1", "b2", "c1"] {
        input.push_str(&format!("{k}\tv{k}\n"));
    }
    t.run_stdin(&["import", "-", "--format", "tsv"], input.as_bytes())
        .ok();
    let keys = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["scan"];
        full.extend_from_slice(args);
        t.run(&full)
            .ok()
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(keys(&["--prefix", "b"]), ["b1", "b2"]);
    assert_eq!(keys(&["--from", "a2", "--to", "b2"]), ["a2", "a3", "b1"]);
    assert_eq!(keys(&["--prefix", "a", "--from", "a2"]), ["a2", "a3"]);
    assert_eq!(keys(&["--reverse", "--limit", "2"]), ["c1", "b2"]);
    assert_eq!(keys(&["--prefix", "b", "--reverse"]), ["b2", "b1"]);
    assert!(keys(&["--from", "z"]).is_empty());
    assert!(keys(&["--from", "b", "--to", "a"]).is_empty());
}

#[test]
fn bad_usage_is_one_clear_error_and_nonzero() {
    let t = TestDb::new();
    // Unknown command, missing argument: clap's message, exit 2.
    let r = t.run(&["frobnicate"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("unrecognized subcommand"), "{}", r.stderr);
    let r = t.run(&["put", "only-a-key"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("VALUE"), "{}", r.stderr);
    // No --db.
    let r = shale(&["get", "k"]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (2, "shale: this command needs --db DIR\n")
    );
    // A read never creates a database in a mistyped directory.
    let r = t.run(&["get", "k"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.starts_with("shale: ") && r.stderr.contains("does not exist"));
    assert_eq!(r.stderr.lines().count(), 1);
    assert!(!t.db.exists());
    // A bad escape.
    let r = t.run(&["-e", "put", "k\\q", "v"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("unknown escape"), "{}", r.stderr);
}

#[test]
fn read_only_reads_beside_a_process_that_holds_the_lock() {
    let t = TestDb::new();
    t.run(&["put", "apple", "red"]).ok();
    let writer = shale::Db::open(&t.db, shale::Options::default()).unwrap();
    writer.put("pear", "green").unwrap();
    assert_eq!(t.run(&["get", "pear"]).code, 2); // locked
    assert_eq!(t.run(&["--read-only", "get", "pear"]).ok(), "green\n");
    assert_eq!(
        t.run(&["--read-only", "scan"]).ok(),
        "apple\tred\npear\tgreen\n"
    );
    let refused = t.run(&["--read-only", "put", "fig", "purple"]);
    assert_eq!(refused.code, 2);
    assert!(refused.stderr.contains("read-only"), "{}", refused.stderr);
}

#[test]
fn get_json_completions_and_the_manual() {
    let t = TestDb::new();
    t.run(&["-e", "put", "k\\xff", "v"]).ok();
    t.run(&["put", "plain", "text"]).ok();
    assert_eq!(
        t.run(&["get", "--json", "plain"]).ok(),
        "{\"key\":\"plain\",\"value\":\"text\"}\n"
    );
    let both = t.run(&["-e", "get", "--json", "plain", "k\\xff"]).ok();
    assert_eq!(both.lines().count(), 2);
    assert!(both.contains("\"key_hex\":\"6bff\""), "{both}");
    assert_eq!(t.run(&["get", "--json", "--raw", "plain"]).code, 2);
    let bash = shale(&["completions", "bash"]).ok();
    assert!(
        bash.contains("checkpoint") && bash.contains("complete"),
        "{bash}"
    );
    let man = shale(&["man"]).ok();
    assert!(
        man.starts_with(".ie") || man.contains(".TH shale 1"),
        "{man}"
    );
}

#[test]
fn put_with_ttl_makes_a_ttl_database_whose_values_expire() {
    let t = TestDb::new();
    t.run(&["put", "short", "lived", "--ttl", "1"]).ok();
    assert!(t.db.join("TTL").exists(), "no TTL marker");
    t.run(&["put", "long", "lived"]).ok();
    assert_eq!(t.run(&["get", "short"]).ok(), "lived\n");
    assert_eq!(t.run(&["scan"]).ok(), "long\tlived\nshort\tlived\n");
    assert_eq!(
        t.run(&["scan", "--reverse", "--limit", "1"]).ok(),
        "short\tlived\n"
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let expired = t.run(&["get", "short"]);
    assert_eq!(expired.code, 1, "{}", expired.stderr);
    assert_eq!(t.run(&["scan"]).ok(), "long\tlived\n");
    t.run(&["compact"]).ok();
    t.run(&["stats"]).ok();
    t.run(&["del", "long"]).ok();
    assert_eq!(t.run(&["scan"]).ok(), "");
    // Values carry their expiry: commands that read them raw refuse a TTL database.
    let export = t.run(&["export"]);
    assert_eq!(export.code, 2);
    assert!(export.stderr.contains("TTL database"), "{}", export.stderr);

    // A plain database does not become a TTL one.
    let plain = TestDb::new();
    plain.run(&["put", "k", "v"]).ok();
    let refused = plain.run(&["put", "k2", "v", "--ttl", "5"]);
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains("not a TTL database"),
        "{}",
        refused.stderr
    );
}

#[test]
fn keyspace_commands_read_and_write_their_own_keys() {
    let t = TestDb::new();
    t.run(&["put", "k", "default"]).ok();
    t.run(&["--keyspace", "log", "put", "k", "log"]).ok();
    t.run(&["--keyspace", "log", "put", "k2", "x"]).ok();
    assert_eq!(t.run(&["get", "k"]).ok(), "default\n");
    assert_eq!(t.run(&["--keyspace", "log", "get", "k"]).ok(), "log\n");
    assert_eq!(
        t.run(&["--keyspace", "log", "scan"]).ok(),
        "k\tlog\nk2\tx\n"
    );
    assert_eq!(t.run(&["keyspaces"]).ok(), "default\nlog\n");
    t.run(&["--keyspace", "log", "del", "k2"]).ok();
    t.run(&["--keyspace", "log", "compact"]).ok();
    let stats = t.run(&["--keyspace", "log", "stats", "--json"]).ok();
    assert!(stats.contains("\"keyspace\": \"log\""), "{stats}");
    assert_eq!(t.run(&["--keyspace", "log", "scan"]).ok(), "k\tlog\n");
    // A read of a keyspace that does not exist makes none.
    let missing = t.run(&["--keyspace", "nope", "get", "k"]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("no keyspace named"),
        "{}",
        missing.stderr
    );
    let unsupported = t.run(&["--keyspace", "log", "export"]);
    assert_eq!(unsupported.code, 2, "{}", unsupported.stderr);
    t.run(&["drop-keyspace", "log"]).ok();
    assert_eq!(t.run(&["keyspaces"]).ok(), "default\n");
    assert_eq!(t.run(&["scan"]).ok(), "k\tdefault\n");
}
