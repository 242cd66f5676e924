//! The search layer's fuzz targets (`shale_search::fuzzing`) on every test run, with the
//! engine's stable-Rust driver (`shale::fuzzing::harness`: seeds, mutations of them and
//! random bytes; `SHALE_FUZZ_SEED`, `SHALE_FUZZ_SCALE` and `SHALE_FUZZ_SECONDS` as there).
//! cargo-fuzz runs the same entry points under libFuzzer: `fuzz/`.

use shale::fuzzing::harness;
use shale_search::fuzzing::{seeds, TARGETS};

shale::fuzz_smoke_tests! {
    targets: TARGETS, seeds: seeds;
    text_records: 20_000, 4_000;
    vector_graph: 20_000, 4_000;
    vector_value: 50_000, 5_000;
}

/// Inputs that once broke a target (found by cargo-fuzz or by this file), kept forever.
const REGRESSIONS: &[(&str, &str)] = &[
    // Review of vector_graph (re-sealed checksum): one node with id 0xf0000000 took seconds
    // to load and write, and a search then allocated marks for 4 billion ids (format.rs).
    (
        "vector_graph",
        "02574e48454c4148530100000001000000040000000400000008000000c800000040000000fe822b65\
         4715e73fed5e0000000000000100000000000000000000f0000000f000000000803f0000000000",
    ),
];

#[test]
fn regressions() {
    harness::regressions(TARGETS, REGRESSIONS);
}
