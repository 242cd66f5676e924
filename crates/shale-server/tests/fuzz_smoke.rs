//! The server's fuzz targets (`shale_server::fuzzing`: the decoders of bytes from the
//! network) on every test run, with the engine's stable-Rust driver
//! (`shale::fuzzing::harness`: seeds, mutations of them and random bytes;
//! `SHALE_FUZZ_SEED`, `SHALE_FUZZ_SCALE` and `SHALE_FUZZ_SECONDS` as there). cargo-fuzz
//! runs the same entry points under libFuzzer: `fuzz/`.

use shale::fuzzing::harness;
use shale_server::fuzzing::{seeds, TARGETS};

fn smoke(name: &str, mutations: u64, randoms: u64) {
    harness::smoke(TARGETS, &seeds(name), name, mutations, randoms);
}

#[test]
fn every_target_is_tested() {
    harness::assert_every_target_smoked(TARGETS, include_str!("fuzz_smoke.rs"));
}

#[test]
fn raft_entry() {
    smoke("raft_entry", 20_000, 4_000);
}

#[test]
fn grpc_message() {
    smoke("grpc_message", 20_000, 4_000);
}

#[test]
fn snapshot_frames() {
    smoke("snapshot_frames", 20_000, 4_000);
}

/// With `SHALE_FUZZ_CORPUS=<dir>`, write every target's seeds to `<dir>/<target>/`.
#[test]
fn write_corpus() {
    harness::write_corpus(TARGETS, seeds);
}

/// The seeds reach past the first check: entries decode, messages are fields.
#[test]
fn seeds_are_valid_inputs() {
    for seed in seeds("raft_entry") {
        shale_server::format::decode_entry(&seed).expect("an entry");
    }
    for seed in seeds("grpc_message") {
        let fields = shale_server::codec::count_fields(&seed, 100).expect("fields");
        assert!(fields > 0);
    }
    assert!(!seeds("snapshot_frames").concat().is_empty());
}
