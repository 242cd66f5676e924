//! stats, compact, verify (clean and after a flipped byte), repair, the dump commands and
//! search.

use crate::common;

use common::{shale, TestDb};

/// A database with a few keys, compacted into an SSTable, plus one write in the WAL.
fn flushed_db() -> TestDb {
    let t = TestDb::new();
    let mut tsv = String::new();
    for i in 0..200 {
        tsv.push_str(&format!("key{i:03}\tvalue number {i}\n"));
    }
    t.run_stdin(&["import", "-", "--format", "tsv"], tsv.as_bytes())
        .ok();
    t.run(&["del", "key007"]).ok();
    t.run(&["compact"]).ok();
    t.run(&["put", "late", "in the wal"]).ok();
    t
}

#[test]
fn stats_json_parses_and_counts_the_files() {
    let t = flushed_db();
    let out = t.run(&["stats", "--json"]).ok();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 7);
    let files: u64 = levels.iter().map(|l| l["files"].as_u64().unwrap()).sum();
    let bytes: u64 = levels.iter().map(|l| l["bytes"].as_u64().unwrap()).sum();
    let entries: u64 = levels.iter().map(|l| l["entries"].as_u64().unwrap()).sum();
    assert!(files >= 1);
    assert_eq!(bytes, v["sst_bytes"].as_u64().unwrap());
    // Compaction dropped key007 and its tombstone (199 left); opening for `stats` saved
    // the WAL holding `late` as an L0 table.
    assert_eq!(entries, 200);
    assert_eq!(levels[0]["entries"], 1);
    assert!(v["space_amplification"].as_f64().unwrap() >= 1.0);
    assert!(
        v["counters"]["block_cache_capacity_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    let text = t.run(&["stats"]).ok();
    assert!(
        text.contains("total SST bytes") && text.contains("L6"),
        "{text}"
    );
}

#[test]
fn verify_passes_then_names_file_and_offset_of_a_flipped_byte() {
    let t = flushed_db();
    let ok = t.run(&["verify"]).ok();
    assert!(ok.starts_with("ok: "), "{ok}");
    let json: serde_json::Value = serde_json::from_str(&t.run(&["verify", "--json"]).ok()).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["entries"], 199);
    assert!(json["wal_records"].as_u64().unwrap() >= 1);

    let sst = t.files("sst").pop().unwrap();
    let mut bytes = std::fs::read(&sst).unwrap();
    bytes[100] ^= 0x20;
    std::fs::write(&sst, bytes).unwrap();
    let bad = t.run(&["verify"]);
    assert_eq!(bad.code, 1, "{}", bad.stdout);
    let want = format!("problem: {} at offset 0: ", sst.display());
    assert!(bad.stdout.starts_with(&want), "{}", bad.stdout);
    assert!(bad.stdout.contains("checksum"), "{}", bad.stdout);
    assert_eq!(bad.stderr, "shale: verify found 1 problem(s)\n");
    // Reading the damaged block fails with the same file and offset, one line, exit 2.
    let r = t.run(&["scan"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with(&format!(
            "shale: corruption in {} at offset 0",
            sst.display()
        )),
        "{}",
        r.stderr
    );
}

#[test]
fn repair_drops_the_damaged_block_and_verify_passes_again() {
    let t = flushed_db();
    let sst = t.files("sst").pop().unwrap();
    let mut bytes = std::fs::read(&sst).unwrap();
    bytes[100] ^= 0x20;
    std::fs::write(&sst, bytes).unwrap();
    let out = t.run(&["repair"]).ok();
    assert!(out.contains("1 data blocks dropped"), "{out}");
    assert!(out.contains("moved to lost/: "), "{out}");
    assert!(
        out.contains(&format!("damage: {} at offset 0", sst.display())),
        "{out}"
    );
    let ok = t.run(&["verify"]).ok();
    assert!(ok.starts_with("ok: "), "{ok}");
    // The WAL's write and the keys outside the first block are still there.
    assert_eq!(t.run(&["get", "late"]).ok(), "in the wal\n");
    assert_eq!(t.run(&["get", "key199"]).ok(), "value number 199\n");
    assert_eq!(
        t.run(&["get", "key000"]).code,
        1,
        "key000 was in the dropped block"
    );
}

#[test]
fn dump_commands_show_the_keys() {
    let t = flushed_db();
    let sst = t.files("sst").pop().unwrap();
    let out = shale(&["dump-sst", sst.to_str().unwrap()]).ok();
    assert!(out.contains("entries: 199"), "{out}");
    assert!(out.contains("\nkey000\t"), "{out}");
    assert!(out.contains("\tput\tvalue number 199\n"), "{out}");
    assert!(out.contains("index ("), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&shale(&["dump-sst", "--json", sst.to_str().unwrap()]).ok()).unwrap();
    assert_eq!(json["entries"].as_array().unwrap().len(), 199);
    assert_eq!(json["entries"][0]["key"], "key000");
    assert!(!json["index"].as_array().unwrap().is_empty());

    let wal = t.files("wal").pop().unwrap();
    let out = shale(&["dump-wal", wal.to_str().unwrap()]).ok();
    assert!(out.contains("put\tlate\tin the wal"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&shale(&["dump-wal", "--json", wal.to_str().unwrap()]).ok()).unwrap();
    assert_eq!(json["records"][0]["entries"][0]["key"], "late");

    let out = t.run(&["dump-manifest"]).ok();
    assert!(out.contains("edit 1 at offset 0"), "{out}");
    assert!(out.contains(".sst: "), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&t.run(&["dump-manifest", "--json"]).ok()).unwrap();
    assert!(!json["edits"].as_array().unwrap().is_empty());
}

#[test]
fn search_with_the_hash_embedder() {
    let t = TestDb::new();
    let sem = ["--semantic", "--embedder", "hash"];
    for (k, v) in [
        ("a", "the cat sat on the mat"),
        ("b", "stock markets fell sharply"),
        ("c", "a dog chased the cat"),
    ] {
        let mut args = sem.to_vec();
        args.extend(["put", k, v]);
        t.run(&args).ok();
    }
    let out = t
        .run(&[
            "--embedder",
            "hash",
            "search",
            "markets",
            "-k",
            "2",
            "--exact",
        ])
        .ok();
    let first: Vec<&str> = out.lines().next().unwrap().split('\t').collect();
    assert_eq!(first[0], "1");
    assert_eq!(first[2], "b");
    assert_eq!(first[3], "stock markets fell sharply");
    let json: serde_json::Value = serde_json::from_str(
        &t.run(&["--embedder", "hash", "search", "cat", "-k", "2", "--json"])
            .ok(),
    )
    .unwrap();
    let keys: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 2);
    assert!(keys.contains(&"a") && keys.contains(&"c"), "{keys:?}");
    // The default model is the real MiniLM (the test script fetches it); the index,
    // built with the hash embedder's 128 dimensions, is re-embedded on open. The CLI finds
    // the model through SHALE_MODEL_DIR or in the default cache directory, and so does
    // this check.
    let r = t.run(&["search", "a kitten resting on a rug", "-k", "1"]);
    if shale_embed::MiniLm::from_env().is_ok() {
        assert_eq!(r.code, 0, "{}", r.stderr);
        let first: Vec<&str> = r.stdout.lines().next().unwrap().split('\t').collect();
        assert_eq!(first[2], "a", "{}", r.stdout);
    } else {
        // Without the model: one clear line that says how to fetch it.
        assert_eq!(r.code, 2);
        assert!(r.stderr.contains("fetch-model.sh"), "{}", r.stderr);
    }
}

#[test]
fn checkpoint_writes_a_copy_that_opens() {
    let t = TestDb::new();
    t.run(&["put", "apple", "red"]).ok();
    t.run(&["flush"]).ok();
    t.run(&["put", "pear", "green"]).ok();
    let copy = t.path("copy");
    t.run(&["checkpoint", copy.to_str().unwrap()]).ok();
    t.run(&["put", "apple", "green"]).ok();
    let scan = shale(&["--db", copy.to_str().unwrap(), "scan"]).ok();
    assert_eq!(scan, "apple\tred\npear\tgreen\n");
    let again = t.run(&["checkpoint", copy.to_str().unwrap()]);
    assert_eq!(again.code, 2);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
}
