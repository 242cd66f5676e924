//! The server's fuzz targets (`shale_server::fuzzing`: the decoders of bytes from the
//! network) on every test run, with the engine's stable-Rust driver
//! (`shale::fuzzing::harness`: seeds, mutations of them and random bytes;
//! `SHALE_FUZZ_SEED`, `SHALE_FUZZ_SCALE` and `SHALE_FUZZ_SECONDS` as there). cargo-fuzz
//! runs the same entry points under libFuzzer: `fuzz/`.

use shale_server::fuzzing::{seeds, TARGETS};

shale::fuzz_smoke_tests! {
    targets: TARGETS, seeds: seeds;
    raft_entry: 20_000, 4_000;
    grpc_message: 20_000, 4_000;
    snapshot_frames: 20_000, 4_000;
}

/// The seeds reach past the first check: entries decode, messages are fields.
#[test]
fn seeds_are_valid_inputs() {
    for seed in seeds("raft_entry") {
        shale_server::format::decode_entry(&seed).expect("an entry");
    }
    for seed in seeds("grpc_message") {
        let fields = shale_client::codec::count_fields(&seed, 100).expect("fields");
        assert!(fields > 0);
    }
    assert!(!seeds("snapshot_frames").concat().is_empty());
}
