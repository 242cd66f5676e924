//! R9 on every test run (`cargo test --features fuzzing`, as `scripts/test.sh` runs it):
//! each fuzz target of `shale::fuzzing` runs over its seeds (valid encodings made by the
//! engine's own encoders), deterministic mutations of them (bit flips, byte overwrites,
//! truncations, insertions, deletions, splices), and random byte
//! strings. A target panics when a decoder breaks its contract, which fails the test; the
//! failing input is printed as hex, ready to become a regression case below or a file for
//! `cargo fuzz run <target> <file>`.
//!
//! `SHALE_FUZZ_SEED` picks the mutation seed (printed on every run); `SHALE_FUZZ_SCALE`
//! multiplies the number of inputs (default 1: the whole file runs in a few seconds);
//! `SHALE_FUZZ_SECONDS=N` keeps each target going with fresh mutations and random inputs
//! until it has run N seconds (`scripts/test.sh` gives each target 60). This is random
//! mutation testing on stable Rust, not coverage-guided: the coverage-guided runs are
//! cargo-fuzz's, in `fuzz/`.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

use shale::fuzzing::{seeds, TARGETS};

/// xorshift64*: small, fast and deterministic.
/// The shared xorshift64* (whose recorded seeds replay), drawing indexes and bytes.
struct Rng(shale_rng::XorShift64Star);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(shale_rng::XorShift64Star::new(seed.max(1)))
    }

    /// Uniform in `0..n`; 0 when `n` is 0.
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.0.next_u64() as u8
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// One to four random edits of `input`, splicing from `other` sometimes.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = [0, 0xff, 0x7f, 0x80, 1, rng.byte()][rng.below(6)];
            }
            2 => v.truncate(rng.below(len + 1)),
            3 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.byte()).collect();
                v.splice(at..at, bytes);
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(16));
                v.drain(at..at + n);
            }
            5 if !other.is_empty() => {
                // Splice: a piece of another seed over or into this one.
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(64));
                let at = rng.below(len + 1);
                let piece = other[from..from + n].to_vec();
                if rng.below(2) == 0 {
                    v.splice(at..at, piece);
                } else {
                    let end = (at + n).min(len);
                    v.splice(at..end, piece);
                }
            }
            6 if len > 1 => {
                // Duplicate a chunk (repeated records, entries, nodes).
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(32));
                let piece = v[at..at + n].to_vec();
                let to = rng.below(len + 1);
                v.splice(to..to, piece);
            }
            _ if len > 0 => {
                // A little-endian length or count field gone wrong.
                let i = rng.below(len);
                let x = [0u8, 0xff, 0x40, 0x10][rng.below(4)];
                for b in v.iter_mut().skip(i).take(4) {
                    *b = x;
                }
            }
            _ => v.push(rng.byte()),
        }
    }
    v
}

/// Run `target` on `input`; on a panic print what is needed to reproduce it and fail.
fn run_one(name: &str, target: fn(&[u8]), input: &[u8], what: &str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(input))) {
        eprintln!(
            "fuzz target {name} panicked on {what}; input ({} bytes):\n{}",
            input.len(),
            hex(input)
        );
        resume_unwind(panic);
    }
}

/// Seeds, `mutations` mutants and `randoms` random strings for the target `name`.
fn smoke(name: &str, mutations: u64, randoms: u64) {
    let (_, target) = *TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .expect("a target of that name");
    let scale = env_u64("SHALE_FUZZ_SCALE", 1);
    let seed = env_u64("SHALE_FUZZ_SEED", 0x5eed_f022);
    let start = Instant::now();
    let corpus = seeds(name);
    assert!(!corpus.is_empty(), "{name} has no seeds");
    for (i, s) in corpus.iter().enumerate() {
        run_one(name, target, s, &format!("seed {i}"));
    }
    let mut rng = Rng::new(
        seed ^ name
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31) ^ u64::from(b)),
    );
    for i in 0..mutations * scale {
        let base = &corpus[rng.below(corpus.len())];
        let other = &corpus[rng.below(corpus.len())];
        // Mutants of mutants reach further from the seeds.
        let mut input = mutate(&mut rng, base, other);
        if rng.below(4) == 0 {
            input = mutate(&mut rng, &input, other);
        }
        run_one(
            name,
            target,
            &input,
            &format!("mutation {i} (SHALE_FUZZ_SEED={seed})"),
        );
    }
    for i in 0..randoms * scale {
        let len = rng.below(300);
        let input: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        run_one(
            name,
            target,
            &input,
            &format!("random {i} (SHALE_FUZZ_SEED={seed})"),
        );
    }
    // Timed mode: alternate mutants and random strings until the budget is spent.
    let budget = std::time::Duration::from_secs(env_u64("SHALE_FUZZ_SECONDS", 0));
    let (mut extra_mutations, mut extra_randoms) = (0u64, 0u64);
    while start.elapsed() < budget {
        let input = if rng.below(8) == 0 {
            extra_randoms += 1;
            let len = rng.below(300);
            (0..len).map(|_| rng.byte()).collect()
        } else {
            extra_mutations += 1;
            let base = &corpus[rng.below(corpus.len())];
            let other = &corpus[rng.below(corpus.len())];
            let mut input = mutate(&mut rng, base, other);
            for _ in 0..rng.below(3) {
                input = mutate(&mut rng, &input, other);
            }
            input
        };
        run_one(
            name,
            target,
            &input,
            &format!(
                "timed input {} (SHALE_FUZZ_SEED={seed})",
                extra_mutations + extra_randoms
            ),
        );
    }
    println!(
        "{name}: {} seeds, {} mutations, {} random inputs in {:.2?} (SHALE_FUZZ_SEED={seed})",
        corpus.len(),
        mutations * scale + extra_mutations,
        randoms * scale + extra_randoms,
        start.elapsed()
    );
}

#[test]
fn every_target_is_tested() {
    let here = include_str!("fuzz_smoke.rs");
    for (name, _) in TARGETS {
        assert!(
            here.contains(&format!("smoke(\"{name}\"")),
            "target {name} has no smoke test"
        );
    }
}

#[test]
fn block() {
    smoke("block", 60_000, 6_000);
}

#[test]
fn sst_footer() {
    smoke("sst_footer", 20_000, 4_000);
}

#[test]
fn sst_table() {
    smoke("sst_table", 12_000, 4_000);
}

#[test]
fn wal_reader() {
    smoke("wal_reader", 10_000, 6_000);
}

#[test]
fn manifest() {
    smoke("manifest", 50_000, 10_000);
}

#[test]
fn vector_graph() {
    smoke("vector_graph", 20_000, 4_000);
}

#[test]
fn vector_value() {
    smoke("vector_value", 50_000, 5_000);
}

#[test]
fn db_ops() {
    smoke("db_ops", 1_500, 200);
}

/// With `SHALE_FUZZ_CORPUS=<dir>`, write every target's seeds to `<dir>/<target>/` (the
/// starting corpus of `cargo fuzz run`; see fuzz/README.md). Does nothing otherwise.
#[test]
fn write_corpus() {
    let Ok(dir) = std::env::var("SHALE_FUZZ_CORPUS") else {
        return;
    };
    for (name, _) in TARGETS {
        let to = std::path::Path::new(&dir).join(name);
        std::fs::create_dir_all(&to).expect("create corpus directory");
        for (i, s) in seeds(name).iter().enumerate() {
            std::fs::write(to.join(format!("seed-{i}")), s).expect("write seed");
        }
    }
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
    for (name, input) in REGRESSIONS {
        let (_, target) = *TARGETS
            .iter()
            .find(|(n, _)| n == name)
            .expect("a target of that name");
        run_one(name, target, &unhex(input), "regression");
    }
}
