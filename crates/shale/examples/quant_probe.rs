//! Scratch probe (not committed): recall of the int8 graph with and without a rescore.
use std::time::Instant;

use shale::vector::{exact, Hnsw, HnswParams, Metric, NodeId};

fn load_glove(path: &str) -> (usize, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
    assert!(header.contains("True"), "expects fortran order");
    let data: Vec<f32> = bytes[10 + len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let rows = 400_000;
    let cols = data.len() / rows;
    let mut out = vec![0f32; data.len()];
    for c in 0..cols {
        for r in 0..rows {
            out[r * cols + c] = data[c * rows + r];
        }
    }
    (cols, out)
}

fn main() {
    let path = std::env::var("GLOVE").unwrap();
    let n: usize = std::env::var("N").map_or(100_000, |v| v.parse().unwrap());
    let nq: usize = std::env::var("NQ").map_or(2_000, |v| v.parse().unwrap());
    let threads: usize = std::env::var("THREADS").map_or(2, |v| v.parse().unwrap());
    let (dim, all) = load_glove(&path);
    let mut rows: Vec<Vec<f32>> = all.chunks_exact(dim).map(|r| r.to_vec()).collect();
    let mut x = 42u64;
    for i in (1..rows.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        rows.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut vs: Vec<Vec<f32>> = Vec::new();
    for mut r in rows {
        if shale::vector::distance::normalize(&mut r) {
            vs.push(r);
        }
        if vs.len() == n + nq {
            break;
        }
    }
    let queries = vs.split_off(n);
    let k = 10;
    let truth: Vec<Vec<u32>> = queries
        .iter()
        .map(|q| {
            exact::search(
                vs.iter()
                    .enumerate()
                    .map(|(i, v)| (NodeId(i as u32), &v[..])),
                q,
                k,
                None,
            )
            .iter()
            .map(|n| n.id.0)
            .collect()
        })
        .collect();
    let params = HnswParams {
        metric: Metric::Cosine,
        ..HnswParams::with_m(16)
    };
    let g = Hnsw::new(dim, params).unwrap();
    let ids: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let t = Instant::now();
    g.insert_all(&ids, |id| vs.get(id.0 as usize).map(|v| &v[..]), threads)
        .unwrap();
    eprintln!(
        "build {:.2}s ({threads} threads), memory {} B/node",
        t.elapsed().as_secs_f64(),
        g.memory_bytes() / n
    );
    scan_probe(&g, &vs, &queries);
    for ef in [80usize] {
        for rerank in [20usize] {
            let t = Instant::now();
            let mut hits = 0;
            for (q, tr) in queries.iter().zip(&truth) {
                let got: Vec<u32> = if rerank == 0 {
                    g.search(q, k, Some(ef), None)
                        .unwrap()
                        .iter()
                        .map(|n| n.id.0)
                        .collect()
                } else {
                    let r = rerank.min(ef);
                    let mut c: Vec<(f32, u32)> = g
                        .search(q, r, Some(ef), None)
                        .unwrap()
                        .iter()
                        .map(|n| (Metric::Cosine.score(q, &vs[n.id.0 as usize]), n.id.0))
                        .collect();
                    c.sort_by(|a, b| b.0.total_cmp(&a.0));
                    c.iter().take(k).map(|c| c.1).collect()
                };
                hits += tr.iter().filter(|t| got.contains(t)).count();
            }
            let secs = t.elapsed().as_secs_f64();
            let (exp, dists) = (1u64, 1u64);
            println!(
                "ef {ef:>4} rerank {rerank:>5}: recall {:.4}  {:>8.0} QPS  {:.0} expansions {:.0} dists/query, {:.1} ns/dist",
                hits as f64 / (k * nq) as f64,
                nq as f64 / secs,
                exp as f64 / nq as f64, dists as f64 / nq as f64, secs * 1e9 / dists as f64
            );
        }
    }
}

#[allow(dead_code)]
fn scan_probe(g: &Hnsw, vs: &[Vec<f32>], queries: &[Vec<f32>]) {
    struct Full<'a>(&'a [Vec<f32>]);
    impl shale::vector::VectorSource for Full<'_> {
        fn vector(&self, id: NodeId) -> Option<&[f32]> {
            self.0.get(id.0 as usize).map(|v| &v[..])
        }
    }
    for width in [1000usize, 10_000, 20_000] {
        let lo = (vs.len() - width) / 2;
        let t = Instant::now();
        for q in queries {
            let ids = (lo as u32..(lo + width) as u32).map(NodeId);
            g.scan(q, ids, 10, &Full(vs), 20).unwrap();
        }
        let per = t.elapsed().as_secs_f64() / queries.len() as f64;
        println!(
            "scan {width}: {:.1} us/query, {:.1} ns/node",
            per * 1e6,
            per * 1e9 / width as f64
        );
    }
}
