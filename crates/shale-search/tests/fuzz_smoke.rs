//! The text index's fuzz target over its seeds, mutations of them and random bytes, on
//! stable Rust (cargo-fuzz runs the same entry point under libFuzzer: `fuzz/`).
//! `SHALE_FUZZ_SECONDS` bounds the run (default: 2,000 mutations a seed).

use shale_rng::SplitMix64;
use shale_search::fuzzing::text_records;
use shale_search::text::{Definition, DocRecord};
use shale_search::Analyzer;

fn seeds() -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    for (i, text) in [
        "",
        "a",
        "The cats chase cats",
        "全文検索 RFC 9110 ENOSPC",
        "x y z x",
    ]
    .iter()
    .enumerate()
    {
        for a in [Analyzer::Simple, Analyzer::English, Analyzer::Cjk] {
            out.push(DocRecord::analyze(a, text, i as u64 * 0x9e37_79b9).encode());
            out.push(
                Definition {
                    analyzer: a,
                    keyspace: (i % 2 == 0).then(|| "docs".to_owned()),
                    prefix: text.as_bytes().to_vec(),
                }
                .encode(),
            );
        }
    }
    out
}

fn mutate(seed: &[u8], rng: &mut SplitMix64) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(4) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len() as u64) as usize;
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => b.truncate(rng.below(b.len() as u64) as usize),
            2 => {
                let at = rng.below(b.len() as u64 + 1) as usize;
                b.insert(at, rng.below(256) as u8);
            }
            _ => {
                let i = rng.below(b.len() as u64 + 1) as usize;
                b.splice(
                    i..i,
                    [0x80, 0xff, 0x00]
                        .into_iter()
                        .take(1 + rng.below(3) as usize),
                );
            }
        }
    }
    b
}

#[test]
fn text_records_never_panic_and_round_trip() {
    let deadline = std::env::var("SHALE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s));
    let mut rng = SplitMix64::new(0xf022);
    let seeds = seeds();
    let mut runs = 0u64;
    loop {
        for seed in &seeds {
            text_records(seed);
            for _ in 0..100 {
                text_records(&mutate(seed, &mut rng));
                runs += 1;
            }
            let random: Vec<u8> = (0..rng.below(64)).map(|_| rng.below(256) as u8).collect();
            text_records(&random);
        }
        let done = match deadline {
            Some(d) => std::time::Instant::now() >= d,
            None => runs >= 2_000 * seeds.len() as u64,
        };
        if done {
            break;
        }
    }
    println!("text_records: {runs} mutations of {} seeds", seeds.len());
}
