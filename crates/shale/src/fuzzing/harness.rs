//! A stable-Rust driver for fuzz targets, shared by every crate that has some: each target
//! runs over its seeds, deterministic mutations of them (bit flips, byte overwrites,
//! truncations, insertions, deletions, splices) and random byte strings. A target panics
//! when a decoder breaks its contract; the failing input is printed as hex, ready to become a
//! regression case or a file for `cargo fuzz run <target> <file>`.
//!
//! `SHALE_FUZZ_SEED` picks the mutation seed (printed on every run); `SHALE_FUZZ_SCALE`
//! multiplies the number of inputs; `SHALE_FUZZ_SECONDS=N` keeps each target going with
//! fresh mutations and random inputs until it has run N seconds. This is random mutation
//! testing, not coverage-guided: the coverage-guided runs are cargo-fuzz's, in `fuzz/`.

// Every index below is drawn below the length it indexes.
#![allow(clippy::indexing_slicing)]

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Instant;

use super::Target;

/// The target `name` of `targets`.
///
/// # Panics
/// When there is none.
pub fn find(targets: &[(&str, Target)], name: &str) -> Target {
    targets
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .unwrap_or_else(|| panic!("no fuzz target {name}"))
}

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

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
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
pub fn run_one(name: &str, target: fn(&[u8]), input: &[u8], what: &str) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(input))) {
        eprintln!(
            "fuzz target {name} panicked on {what}; input ({} bytes):\n{}",
            input.len(),
            hex(input)
        );
        resume_unwind(panic);
    }
}

/// Run the target `name` of `targets` over `corpus` (its seeds), `mutations` mutants and
/// `randoms` random strings, each count times `SHALE_FUZZ_SCALE`; then, with
/// `SHALE_FUZZ_SECONDS`, more of both until that many seconds have passed.
///
/// # Panics
/// When the target panics (after printing the input as hex), when `targets` has no `name`,
/// or when `corpus` is empty.
pub fn smoke(
    targets: &[(&str, Target)],
    corpus: &[Vec<u8>],
    name: &str,
    mutations: u64,
    randoms: u64,
) {
    let target = find(targets, name);
    let scale = env_u64("SHALE_FUZZ_SCALE", 1);
    let seed = env_u64("SHALE_FUZZ_SEED", 0x5eed_f022);
    let start = Instant::now();
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
        let input = random_input(&mut rng);
        run_one(
            name,
            target,
            &input,
            &format!("random {i} (SHALE_FUZZ_SEED={seed})"),
        );
    }
    let (extra_mutations, extra_randoms) = run_timed(name, target, corpus, &mut rng, seed, start);
    println!(
        "{name}: {} seeds, {} mutations, {} random inputs in {:.2?} (SHALE_FUZZ_SEED={seed})",
        corpus.len(),
        mutations * scale + extra_mutations,
        randoms * scale + extra_randoms,
        start.elapsed()
    );
}

/// Timed mode: alternate mutants of `corpus` and random strings (about one in eight)
/// until `SHALE_FUZZ_SECONDS` after `start`. Returns how many of each ran.
fn run_timed(
    name: &str,
    target: Target,
    corpus: &[Vec<u8>],
    rng: &mut Rng,
    seed: u64,
    start: Instant,
) -> (u64, u64) {
    let budget = std::time::Duration::from_secs(env_u64("SHALE_FUZZ_SECONDS", 0));
    let (mut extra_mutations, mut extra_randoms) = (0u64, 0u64);
    while start.elapsed() < budget {
        let input = if rng.below(8) == 0 {
            extra_randoms += 1;
            random_input(rng)
        } else {
            extra_mutations += 1;
            let base = &corpus[rng.below(corpus.len())];
            let other = &corpus[rng.below(corpus.len())];
            let mut input = mutate(rng, base, other);
            for _ in 0..rng.below(3) {
                input = mutate(rng, &input, other);
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
    (extra_mutations, extra_randoms)
}

/// A random string of up to 299 bytes.
fn random_input(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(300);
    (0..len).map(|_| rng.byte()).collect()
}

/// That `tested` names every target of `targets`, and nothing else.
///
/// # Panics
/// Naming the first target without a test, or the first name that is no target.
pub fn assert_every_target_tested(targets: &[(&str, Target)], tested: &[&str]) {
    for (name, _) in targets {
        assert!(tested.contains(name), "target {name} has no smoke test");
    }
    for name in tested {
        assert!(
            targets.iter().any(|(n, _)| n == name),
            "{name} is no fuzz target"
        );
    }
}

/// A crate's fuzz smoke tests (the `fuzz_smoke` module of its integration tests): one
/// `#[test]` per target, running [`smoke`] with the given numbers of mutants and random
/// inputs, and the two tests every such module has: that each of `targets` has its test,
/// and [`write_corpus`].
///
/// ```ignore
/// shale::fuzz_smoke_tests! {
///     targets: TARGETS, seeds: seeds;
///     block: 60_000, 6_000;
///     db_ops: 1_500, 200;
/// }
/// ```
#[macro_export]
macro_rules! fuzz_smoke_tests {
    (targets: $targets:expr, seeds: $seeds:expr; $($name:ident: $mutations:expr, $randoms:expr;)+) => {
        $(
            #[test]
            fn $name() {
                let name = stringify!($name);
                $crate::fuzzing::harness::smoke($targets, &$seeds(name), name, $mutations, $randoms);
            }
        )+

        #[test]
        fn every_target_is_tested() {
            $crate::fuzzing::harness::assert_every_target_tested($targets, &[$(stringify!($name)),+]);
        }

        /// With `SHALE_FUZZ_CORPUS=<dir>`, write every target's seeds to `<dir>/<target>/`.
        #[test]
        fn write_corpus() {
            $crate::fuzzing::harness::write_corpus($targets, $seeds);
        }
    };
}

/// Every input of `regressions` (target name, input as hex) through its target.
///
/// # Panics
/// When a target panics on its input.
pub fn regressions(targets: &[(&str, Target)], regressions: &[(&str, &str)]) {
    for (name, input) in regressions {
        run_one(name, find(targets, name), &unhex(input), "regression");
    }
}

/// With `SHALE_FUZZ_CORPUS=<dir>`, write every target's seeds to `<dir>/<target>/` (the
/// starting corpus of `cargo fuzz run`; see fuzz/README.md). Does nothing otherwise.
///
/// # Panics
/// When a file cannot be written.
pub fn write_corpus(targets: &[(&str, Target)], seeds: fn(&str) -> Vec<Vec<u8>>) {
    let Ok(dir) = std::env::var("SHALE_FUZZ_CORPUS") else {
        return;
    };
    for (name, _) in targets {
        let to = Path::new(&dir).join(name);
        std::fs::create_dir_all(&to).expect("create corpus directory");
        for (i, s) in seeds(name).iter().enumerate() {
            std::fs::write(to.join(format!("seed-{i}")), s).expect("write seed");
        }
    }
}
