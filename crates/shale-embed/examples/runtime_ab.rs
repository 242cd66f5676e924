//! ONNX Runtime against candle on WordNet glosses, in one process, the runs interleaved so
//! that other work on a shared machine falls on both alike: bulk throughput of
//! `Embedder::embed`, the latency of one short query, how far the two runtimes' vectors are
//! apart, and what padding costs (one run per batch of 32 in input order, against the same
//! texts sorted by length).
//!
//! ```sh
//! scripts/fetch-model.sh && scripts/fetch-wordnet.sh
//! cargo run --release -p shale-embed --example runtime_ab [-- --texts 2000 --rounds 3]
//! ```

use std::time::Instant;

use shale_embed::{MiniLm, OnnxMiniLm};
use shale_search::semantic::Embedder;
use shale_testkit::wordnet;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    shale_embed::quiet_candle_threads();
    let (texts_n, rounds) = args()?;
    let cache = shale_embed::default_model_dir()
        .and_then(|d| Some(d.parent()?.parent()?.join("wordnet")))
        .ok_or("no cache directory")?;
    let glosses = wordnet::load(&cache)?;
    // Every n-th gloss: all parts of speech, in WordNet's order (not sorted by length).
    let step = (glosses.len() / texts_n.max(1)).max(1);
    let texts: Vec<&str> = glosses
        .iter()
        .step_by(step)
        .take(texts_n)
        .map(|g| g.text.as_str())
        .collect();
    let dir = shale_embed::model_dir_from_env()?;
    let t = Instant::now();
    let onnx = OnnxMiniLm::load(&dir)?;
    println!("onnx load {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let candle = MiniLm::load(&dir)?;
    println!("candle load {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    let runtimes: [(&str, &dyn Embedder); 2] = [("onnx", &onnx), ("candle", &candle)];

    println!(
        "{} WordNet glosses, {rounds} rounds, load average {}",
        texts.len(),
        load_average()
    );
    let vectors = interleaved(&runtimes, &texts, rounds)?;
    if let [a, b] = &vectors[..] {
        agreement(a, b);
    }
    padding(&onnx, &texts)
}

/// `--texts N` (default 2000) and `--rounds N` (default 3).
fn args() -> Result<(usize, usize)> {
    let mut texts_n = 2000usize;
    let mut rounds = 3usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--texts" => texts_n = value.parse()?,
            "--rounds" => rounds = value.parse()?,
            _ => return Err(format!("unknown flag {flag}").into()),
        }
    }
    Ok((texts_n, rounds))
}

/// Short queries: the definitions of the first 60 texts up to their first ';'.
fn queries(texts: &[&str]) -> Vec<String> {
    texts
        .iter()
        .take(60)
        .map(|t| {
            let def = t.split_once(": ").map_or(*t, |(_, d)| d);
            def.split(';').next().unwrap_or(def).trim().to_string()
        })
        .collect()
}

/// `rounds` rounds, each embedding `texts` in bulk and 20 one-text queries with every
/// runtime in turn; prints each runtime's medians and returns its first round's vectors.
fn interleaved(
    runtimes: &[(&str, &dyn Embedder)],
    texts: &[&str],
    rounds: usize,
) -> Result<Vec<Vec<Vec<f32>>>> {
    let queries = queries(texts);
    let mut bulk = vec![Vec::new(); runtimes.len()];
    let mut per_cpu = vec![Vec::new(); runtimes.len()];
    let mut query_ms = vec![Vec::new(); runtimes.len()];
    let mut vectors = vec![Vec::new(); runtimes.len()];
    for round in 0..rounds {
        for (i, (_, model)) in runtimes.iter().enumerate() {
            let (t, cpu) = (Instant::now(), cpu_seconds());
            let v = model.embed(texts)?;
            if let Some(b) = bulk.get_mut(i) {
                b.push(texts.len() as f64 / t.elapsed().as_secs_f64());
            }
            if let Some(c) = per_cpu.get_mut(i) {
                c.push(texts.len() as f64 / (cpu_seconds() - cpu));
            }
            if round == 0 {
                vectors[i] = v;
            }
            for q in queries.iter().skip(round * 20).take(20) {
                let t = Instant::now();
                model.embed(&[q.as_str()])?;
                if let Some(l) = query_ms.get_mut(i) {
                    l.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
    }
    for (i, (name, _)) in runtimes.iter().enumerate() {
        let b = &mut bulk[i];
        let runs: Vec<String> = b.iter().map(|x| format!("{x:.0}")).collect();
        println!(
            "{name:>6}: embed {:>6.0} texts/s (median; runs {}), {:.0} texts per CPU-second, one query p50 {:.2} ms",
            median(b),
            runs.join(" "),
            median(&mut per_cpu[i]),
            median(&mut query_ms[i]),
        );
    }
    Ok(vectors)
}

/// How far apart the two runtimes' vectors of the same texts are.
fn agreement(onnx: &[Vec<f32>], candle: &[Vec<f32>]) {
    let (mut min_cos, mut max_diff, mut sum_cos) = (f32::MAX, 0f32, 0f64);
    for (a, b) in onnx.iter().zip(candle) {
        let cos: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let diff = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        min_cos = min_cos.min(cos);
        max_diff = max_diff.max(diff);
        sum_cos += f64::from(cos);
    }
    println!(
        "onnx vs candle: mean cosine {:.7}, min {min_cos:.7}, max |diff| {max_diff:.2e}",
        sum_cos / onnx.len() as f64
    );
}

/// One-thread runs over batches of 32 in input order against the same texts sorted by
/// token count: the cost of padding a batch to its longest text.
fn padding(model: &OnnxMiniLm, texts: &[&str]) -> Result<()> {
    let mut by_len: Vec<&str> = texts.to_vec();
    by_len.sort_by_key(|t| t.split_whitespace().count());
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..3 {
        for (i, order) in [texts, &by_len[..]].iter().enumerate() {
            let t = Instant::now();
            for chunk in order.chunks(32) {
                model.embed_batch(chunk)?;
            }
            times[i].push(order.len() as f64 / t.elapsed().as_secs_f64());
        }
    }
    let [mut input, mut sorted] = times;
    println!(
        "padding, one thread, batches of 32: input order {:.0} texts/s, sorted by length {:.0} texts/s ({:.2}x)",
        median(&mut input),
        median(&mut sorted),
        median(&mut sorted) / median(&mut input)
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// User + system CPU seconds of this process, from /proc (USER_HZ is 100 on Linux); 0
/// elsewhere.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: f64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse::<f64>().ok())
        .sum();
    ticks / 100.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
