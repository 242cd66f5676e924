//! R9 on every test run (`cargo test --features fuzzing`, as `scripts/test.sh` runs it):
//! each fuzz target of `shale::fuzzing` runs over its seeds (valid encodings made by the
//! engine's own encoders), deterministic mutations of them and random byte strings, with the
//! shared driver `shale::fuzzing::harness` (whose documentation has the environment
//! variables; `scripts/test.sh` gives each target 60 s). A failing input is printed as hex,
//! ready to become a regression case below or a file for `cargo fuzz run <target> <file>`.

use shale::fuzzing::harness;
use shale::fuzzing::{seeds, TARGETS};

shale::fuzz_smoke_tests! {
    targets: TARGETS, seeds: seeds;
    block: 60_000, 6_000;
    sst_footer: 20_000, 4_000;
    sst_table: 12_000, 4_000;
    wal_reader: 10_000, 6_000;
    manifest: 50_000, 10_000;
    db_ops: 1_500, 200;
}

/// Inputs that once broke a target (found by cargo-fuzz or by this file), kept forever.
const REGRESSIONS: &[(&str, &str)] = &[
    // cargo-fuzz, wal_reader: a WAL record whose batch header claims first_seq near
    // u64::MAX; BatchReader::new overflowed adding sequence numbers (batch.rs).
    (
        "wal_reader",
        "0185100000000000000000ffffffffffffffffffffffffffffffffffffffffffffffffffffffffff\
         ffffffffffffffffffffffffffffffffffffffffffffffffffffff5dffffffffffffffffffffffff\
         fffffffff7ffff03619e6300000000",
    ),
    // cargo-fuzz campaign, wal_reader: a log cut right after a whole middle fragment read
    // as corruption, not a torn tail: the reader found the cut record's own fragments
    // "after the damage" (wal/reader.rs).
    (
        "wal_reader",
        "83148608f05b59970c009d000000000001000001ffffffff0000000000ffffffffffffffffffffff\
         ff000000000000000000000000000000000000000031000000000000000000000000000000b8b8b8\
         b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8b8000000000000000000000002000000\
         009c9c9c9c9c9c018510900903bd61ebebebebebebebebebebebebebebebeb5c710a2f",
    ),
    // cargo-fuzz campaign, wal_reader: a torn record whose value holds a whole valid log
    // fragment read as corruption; the reader took the copy for a fragment written after
    // the damage (wal/reader.rs, format.rs checksum_matches_shorter_payload).
    (
        "wal_reader",
        "010185109009021000000100000000000000000000007c0000000000000000030101010101010101\
         0101010101018510900902000000015a7f1035cee38459721728cd5a015a7f0000002a0000000000\
         052b2843000001f1b600000000000000000000000000000000000000002001010101010101010101\
         0301010100f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f50101000000000000000101010101\
         01010101010101000000000101010101000000000000002c00000000000000000000000000000000\
         00000000000000000000002e0000000000e6e6000001010101010000010101010101010000000001\
         0101c6e6e6d00000e6e601010101000101010101010101010101000000000001010122c798bd56bb\
         6b0c000001005c710a10172fc0e5",
    ),
];

#[test]
fn regressions() {
    harness::regressions(TARGETS, REGRESSIONS);
}
