//! Build an HNSW graph over N vectors and report build time, queries per second and
//! recall@10 against exact search at several `ef`.
//!
//! ```text
//! cargo run --release -p shale --example hnsw_probe -- [options]
//!   --npy FILE           float32 C-order 2-D .npy (rows are vectors); else synthetic data
//!   --data clustered|random   synthetic kind (default clustered)
//!   --n 100000 --dim 64  synthetic size; with --npy, --n caps the rows used
//!   --queries 1000       held out from the end of the data
//!   --m 16 --ef-construction 200 --threads 1 --seed 42
//!   --ef 10,20,40,80,160,320
//! ```
//!
//! Queries run one at a time on one thread, as hnswlib's `knn_query` with `num_threads=1`
//! does, so the numbers compare with it on the same data and parameters.

use std::path::Path;
use std::time::Instant;

use shale::vector::{exact, Hnsw, HnswParams, Neighbor, NodeId};

struct Args {
    npy: Option<String>,
    data: String,
    n: usize,
    dim: usize,
    queries: usize,
    m: usize,
    ef_construction: usize,
    threads: usize,
    seed: u64,
    efs: Vec<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        npy: None,
        data: "clustered".into(),
        n: 100_000,
        dim: 64,
        queries: 1000,
        m: 16,
        ef_construction: 200,
        threads: 1,
        seed: 42,
        efs: vec![10, 20, 40, 80, 160, 320],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = || value.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--npy" => a.npy = Some(value.clone()),
            "--data" => a.data = value.clone(),
            "--n" => a.n = num()?,
            "--dim" => a.dim = num()?,
            "--queries" => a.queries = num()?,
            "--m" => a.m = num()?,
            "--ef-construction" => a.ef_construction = num()?,
            "--threads" => a.threads = num()?.max(1),
            "--seed" => a.seed = num()? as u64,
            "--ef" => {
                a.efs = value
                    .split(',')
                    .map(|s| s.trim().parse().map_err(|e| format!("--ef: {e}")))
                    .collect::<Result<_, _>>()?
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(a)
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn gauss(&mut self) -> f32 {
        let mut u = || ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let (a, b) = (u(), u());
        ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
    }
}

/// Uniform random directions (`random`), or points of 40 clusters in a 12-dimensional latent
/// space mapped into `dim` dimensions plus noise (`clustered`), closer to real embeddings.
fn synthetic(kind: &str, n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(n * dim);
    if kind == "random" {
        out.extend((0..n * dim).map(|_| rng.gauss()));
        return out;
    }
    const LATENT: usize = 12;
    const CLUSTERS: usize = 40;
    let map: Vec<f32> = (0..dim * LATENT).map(|_| rng.gauss()).collect();
    let centers: Vec<f32> = (0..CLUSTERS * LATENT).map(|_| 2.0 * rng.gauss()).collect();
    for _ in 0..n {
        let c = (rng.next() % CLUSTERS as u64) as usize;
        let z: Vec<f32> = centers[c * LATENT..(c + 1) * LATENT]
            .iter()
            .map(|&m| m + rng.gauss())
            .collect();
        for row in map.chunks_exact(LATENT) {
            let x: f32 = row.iter().zip(&z).map(|(a, b)| a * b).sum();
            out.push(x + 0.3 * rng.gauss());
        }
    }
    out
}

/// A float32, C-order, 2-D `.npy` file: (rows, cols, data).
fn read_npy(path: &Path) -> Result<(usize, usize, Vec<f32>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.get(..6) != Some(b"\x93NUMPY") {
        return Err("not a .npy file".into());
    }
    let major = bytes.get(6).copied().ok_or("truncated")?;
    let (len, start) = if major == 1 {
        let b = bytes.get(8..10).ok_or("truncated")?;
        (u16::from_le_bytes([b[0], b[1]]) as usize, 10)
    } else {
        let b = bytes.get(8..12).ok_or("truncated")?;
        (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
    };
    let header = std::str::from_utf8(bytes.get(start..start + len).ok_or("truncated")?)
        .map_err(|e| e.to_string())?;
    if !header.contains("'<f4'") || header.contains("'fortran_order': True") {
        return Err(format!(
            "need little-endian float32 in C order, got {header}"
        ));
    }
    let shape = header
        .split("'shape':")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .ok_or("no shape")?;
    let dims: Vec<usize> = shape
        .trim_start_matches([' ', '('])
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let [rows, cols] = dims[..] else {
        return Err(format!("need a 2-D array, shape {shape}"));
    };
    let data: Vec<f32> = bytes[start + len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if data.len() != rows * cols {
        return Err(format!("{} floats for shape ({rows}, {cols})", data.len()));
    }
    Ok((rows, cols, data))
}

fn normalise_rows(data: &mut [f32], dim: usize) {
    for row in data.chunks_exact_mut(dim) {
        if !shale::vector::distance::normalize(row) {
            row.fill(0.0);
            row[0] = 1.0;
        }
    }
}

fn main() -> Result<(), String> {
    let a = parse_args()?;
    let (rows, dim, mut data) = match &a.npy {
        Some(p) => {
            let (rows, cols, mut d) = read_npy(Path::new(p))?;
            let rows = rows.min(a.n + a.queries);
            d.truncate(rows * cols);
            (rows, cols, d)
        }
        None => (
            a.n + a.queries,
            a.dim,
            synthetic(&a.data, a.n + a.queries, a.dim, a.seed),
        ),
    };
    normalise_rows(&mut data, dim);
    let queries_n = a.queries.min(rows / 2);
    let n = rows - queries_n;
    let (base, queries) = data.split_at(n * dim);
    let source = a.npy.clone().unwrap_or(format!("{} synthetic", a.data));
    println!(
        "data: {source}, {n} vectors x {dim}, {queries_n} queries, seed {}",
        a.seed
    );

    let params = HnswParams {
        ef_construction: a.ef_construction,
        seed: a.seed,
        ..HnswParams::with_m(a.m)
    };
    println!(
        "params: m {} m_max {} m_max0 {} ef_construction {} ml {:.4}, {} build thread(s)",
        params.m, params.m_max, params.m_max0, params.ef_construction, params.ml, a.threads
    );
    let g = Hnsw::new(dim, params).map_err(|e| e.to_string())?;
    let ids: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let started = Instant::now();
    g.insert_all(
        &ids,
        |id| base.get(id.0 as usize * dim..(id.0 as usize + 1) * dim),
        a.threads,
    )
    .map_err(|e| e.to_string())?;
    let build = started.elapsed().as_secs_f64();
    println!(
        "build: {build:.3} s, {:.1} us/insert (wall), {:.0} inserts/s",
        build * 1e6 / n as f64,
        n as f64 / build
    );

    let k = 10;
    let started = Instant::now();
    let truth = ground_truth(base, queries, dim, k, a.threads.max(2));
    println!(
        "exact: {:.3} s for {queries_n} queries ({:.0} QPS on {} threads)",
        started.elapsed().as_secs_f64(),
        queries_n as f64 / started.elapsed().as_secs_f64(),
        a.threads.max(2)
    );

    println!(
        "{:>6} {:>10} {:>10} {:>10}",
        "ef", "QPS", "us/query", "recall@10"
    );
    for &ef in &a.efs {
        let started = Instant::now();
        let mut results = Vec::with_capacity(queries_n);
        for q in queries.chunks_exact(dim) {
            results.push(g.search(q, k, Some(ef), None).map_err(|e| e.to_string())?);
        }
        let secs = started.elapsed().as_secs_f64();
        let hits: usize = results
            .iter()
            .zip(&truth)
            .map(|(got, want)| {
                want.iter()
                    .filter(|w| got.iter().any(|g| g.id == w.id))
                    .count()
            })
            .sum();
        println!(
            "{ef:>6} {:>10.0} {:>10.1} {:>10.4}",
            queries_n as f64 / secs,
            secs * 1e6 / queries_n as f64,
            hits as f64 / (queries_n * k) as f64
        );
    }
    Ok(())
}

fn ground_truth(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    k: usize,
    threads: usize,
) -> Vec<Vec<Neighbor>> {
    let qs: Vec<&[f32]> = queries.chunks_exact(dim).collect();
    let per = qs.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = qs
            .chunks(per)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|q| {
                            let items = base
                                .chunks_exact(dim)
                                .enumerate()
                                .map(|(i, v)| (NodeId(i as u32), v));
                            exact::search(items, q, k, None)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("ground-truth thread panicked"))
            .collect()
    })
}
