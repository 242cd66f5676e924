//! Tests of the HNSW graph against exact search: recall, concurrency, tombstones, filters,
//! the file format and its corruption handling. Every test prints its seed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::distance::normalize;
use super::{exact, Filter, Hnsw, HnswParams, Neighbor, NodeId, VectorSource};
use shale::error::Error;

/// The full vectors of test data, by node id.
struct Full<'a>(&'a [Vec<f32>]);

impl VectorSource for Full<'_> {
    fn vector(&self, id: NodeId) -> Option<&[f32]> {
        self.0.get(id.0 as usize).map(|v| &v[..])
    }
}

/// The shared splitmix64 (failures reproduce from the printed seed) with what these tests draw: indexes, and normal deviates.
struct Rng(shale_rng::SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(shale_rng::SplitMix64::new(seed))
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.below(n as u64) as usize
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn gauss(&mut self) -> f32 {
        let (u, v) = (self.unit(), self.unit());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }
}

/// Vectors shaped like text embeddings rather than like uniform noise: points of a few dozen
/// clusters in a low-dimensional latent space, mapped linearly into `dim` dimensions, plus a
/// little full-dimensional noise, then normalised. (Uniform random unit vectors in 32+
/// dimensions have no neighbourhood structure at all and are a worst case no real data has.)
fn embeddings(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    const LATENT: usize = 12;
    const CLUSTERS: usize = 40;
    let mut rng = Rng::new(seed);
    let map: Vec<f32> = (0..dim * LATENT).map(|_| rng.gauss()).collect();
    let centers: Vec<Vec<f32>> = (0..CLUSTERS)
        .map(|_| (0..LATENT).map(|_| 2.0 * rng.gauss()).collect())
        .collect();
    (0..n)
        .map(|_| {
            let c = &centers[rng.below(CLUSTERS)];
            let z: Vec<f32> = c.iter().map(|&m| m + rng.gauss()).collect();
            let mut v: Vec<f32> = (0..dim)
                .map(|i| {
                    let row = &map[i * LATENT..(i + 1) * LATENT];
                    row.iter().zip(&z).map(|(a, b)| a * b).sum::<f32>() + 0.3 * rng.gauss()
                })
                .collect();
            assert!(normalize(&mut v));
            v
        })
        .collect()
}

fn params(seed: u64) -> HnswParams {
    HnswParams {
        ef_construction: 100,
        seed,
        ..HnswParams::with_m(16)
    }
}

fn build(data: &[Vec<f32>], p: HnswParams, threads: usize) -> Hnsw {
    let g = Hnsw::new(data[0].len(), p).unwrap();
    let ids: Vec<NodeId> = (0..data.len() as u32).map(NodeId).collect();
    g.insert_all(&ids, |id| data.get(id.0 as usize).map(|v| &v[..]), threads)
        .unwrap();
    g
}

fn exact_top(
    data: &[Vec<f32>],
    q: &[f32],
    k: usize,
    keep: &dyn Fn(NodeId) -> bool,
) -> Vec<Neighbor> {
    let items = data
        .iter()
        .enumerate()
        .map(|(i, v)| (NodeId(i as u32), &v[..]));
    exact::search(items, q, k, Some(keep))
}

/// Mean recall@k against exact search over `queries` of the graph's search as the index
/// runs it: the best `2k` by code re-scored with the full vectors.
fn recall(
    g: &Hnsw,
    data: &[Vec<f32>],
    queries: &[Vec<f32>],
    k: usize,
    ef: usize,
    keep: &dyn Fn(NodeId) -> bool,
) -> f64 {
    let mut hits = 0usize;
    let mut total = 0usize;
    for q in queries {
        let truth = exact_top(data, q, k, keep);
        let got = g
            .search_rescored(q, k, Some(ef), Some(Filter::new(keep)), &Full(data), 2 * k)
            .unwrap();
        assert!(got.iter().all(|n| keep(n.id)), "a result fails the filter");
        assert!(got.windows(2).all(|w| w[0] >= w[1]), "results not sorted");
        hits += truth
            .iter()
            .filter(|t| got.iter().any(|n| n.id == t.id))
            .count();
        total += truth.len();
    }
    hits as f64 / total.max(1) as f64
}

const ALL: &dyn Fn(NodeId) -> bool = &|_| true;

#[test]
fn recall_at_10_on_20k_clustered_vectors() {
    let seed = 0x00c0_ffee;
    let (n, dim) = (20_000, 48);
    let data = embeddings(n + 200, dim, seed);
    let (data, queries) = data.split_at(n);
    let started = Instant::now();
    let g = build(data, params(seed), 1);
    let built = started.elapsed();
    let r = recall(&g, data, queries, 10, 64, ALL);
    println!("seed {seed:#x}: {n} x {dim}, built in {built:?}, recall@10 at ef 64 = {r:.4}");
    assert_eq!(g.len(), n);
    assert!(r >= 0.95, "recall@10 {r} < 0.95 (seed {seed:#x})");
}

#[test]
fn concurrent_inserts_and_searches_keep_recall() {
    let seed = 0xbad_cafe;
    let (n, dim) = (20_000, 32);
    let data = embeddings(n + 200, dim, seed);
    let (data, queries) = data.split_at(n);
    let g = Hnsw::new(dim, params(seed)).unwrap();
    let ids: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let done = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|s| {
        // A reader searching while two writers insert: results must always be well formed.
        s.spawn(|| {
            let mut rounds = 0;
            while !done.load(Ordering::Acquire) {
                let q = &queries[rounds % queries.len()];
                let got = g.search(q, 10, None, None).unwrap();
                assert!(got.len() <= 10);
                assert!(got.iter().all(|r| (r.id.0 as usize) < n));
                rounds += 1;
            }
        });
        g.insert_all(&ids, |id| data.get(id.0 as usize).map(|v| &v[..]), 2)
            .unwrap();
        done.store(true, Ordering::Release);
    });
    let built = started.elapsed();
    let r = recall(&g, data, queries, 10, 64, ALL);
    println!("seed {seed:#x}: {n} x {dim} by 2 threads in {built:?}, recall@10 = {r:.4}");
    assert_eq!(g.len(), n);
    assert_eq!(g.ids().count(), n);
    assert!(r >= 0.95, "recall@10 {r} < 0.95 (seed {seed:#x})");
}

#[test]
fn tombstones_are_never_returned_and_rebuild_reclaims_them() {
    let seed = 0x7011b;
    let (n, dim) = (3000, 24);
    let data = embeddings(n + 100, dim, seed);
    let (data, queries) = data.split_at(n);
    let g = build(data, params(seed), 1);
    let mut rng = Rng::new(seed);
    let mut dead = vec![false; n];
    while g.deleted_count() < n * 3 / 10 {
        let i = rng.below(n);
        assert_eq!(g.mark_deleted(NodeId(i as u32)).unwrap(), !dead[i]);
        dead[i] = true;
    }
    assert!(g.needs_reclaim());
    assert_eq!(g.live_count(), n - g.deleted_count());
    let alive = |id: NodeId| !dead[id.0 as usize];
    for q in queries {
        let got = g.search(q, 10, None, None).unwrap();
        assert_eq!(got.len(), 10);
        assert!(got.iter().all(|r| alive(r.id)), "a tombstone was returned");
    }
    let before = recall(&g, data, queries, 10, 64, &alive);

    let fresh = g.rebuilt(2).unwrap();
    assert_eq!(fresh.len(), g.live_count());
    assert_eq!(fresh.deleted_count(), 0);
    assert!(!fresh.needs_reclaim());
    assert!(fresh.ids().all(alive));
    let after = recall(&fresh, data, queries, 10, 64, &alive);
    println!("seed {seed:#x}: recall with 30% tombstones {before:.4}, after rebuild {after:.4}");
    assert!(before >= 0.95 && after >= 0.95);

    // Overwrite = delete the old id, insert under a new one; an id is never reused.
    let id = fresh.ids().next().unwrap();
    assert!(fresh.mark_deleted(id).unwrap());
    let err = fresh.insert(id, &data[0]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    fresh
        .insert(NodeId(n as u32), &data[id.0 as usize])
        .unwrap();
    let got = fresh.search(&data[id.0 as usize], 1, None, None).unwrap();
    assert_eq!(got[0].id, NodeId(n as u32));
    assert!(fresh.mark_deleted(NodeId(999_999)).is_err());
}

#[test]
fn filters_restrict_results_without_losing_recall() {
    let seed = 0xf117e5;
    let (n, dim) = (4000, 32);
    let data = embeddings(n + 100, dim, seed);
    let (data, queries) = data.split_at(n);
    let g = build(data, params(seed), 1);
    for modulus in [2u32, 7, 100] {
        let keep = move |id: NodeId| id.0 % modulus == 3 % modulus;
        let r = recall(&g, data, queries, 10, 64, &keep);
        println!("seed {seed:#x}: filter 1/{modulus}: recall@10 = {r:.4}");
        assert!(r >= 0.95, "filter 1/{modulus}: recall {r}");
    }
    // The graph's exact search agrees with the reference, filter and all.
    let keep = |id: NodeId| id.0.is_multiple_of(3);
    for q in &queries[..10] {
        assert_eq!(
            g.exact_search(q, 10, Some(&keep), &Full(data)).unwrap(),
            exact_top(data, q, 10, &keep)
        );
    }
    assert!(g
        .search(&queries[0], 10, None, Some(&|_| false))
        .unwrap()
        .is_empty());
}

#[test]
fn bad_arguments_are_refused() {
    let g = Hnsw::new(3, HnswParams::default()).unwrap();
    assert!(g
        .search(&[1.0, 0.0, 0.0], 5, None, None)
        .unwrap()
        .is_empty());
    assert!(g.entry_point().is_none());
    g.insert(NodeId(4), &[3.0, 0.0, 4.0]).unwrap();
    let stored = g.decoded(NodeId(4)).unwrap();
    assert!(
        stored
            .iter()
            .zip([0.6, 0.0, 0.8])
            .all(|(a, b)| (a - b).abs() < 0.01),
        "stored normalised: {stored:?}"
    );
    for (id, v) in [
        (5, &[1.0, 0.0][..]),
        (5, &[0.0; 3][..]),
        (5, &[f32::NAN, 1.0, 0.0][..]),
    ] {
        let err = g.insert(NodeId(id), v).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    assert!(
        g.insert(NodeId(4), &[1.0, 0.0, 0.0]).is_err(),
        "duplicate id"
    );
    assert!(g.search(&[1.0, 0.0], 5, None, None).is_err());
    assert!(g.search(&[0.0, 0.0, 0.0], 5, None, None).is_err());
    let got = g.search(&[0.0, 0.0, 2.0], 5, None, None).unwrap();
    assert_eq!(got.len(), 1);
    assert!(
        (got[0].score - 0.8).abs() < 0.01,
        "the codes' score is close"
    );
    let full = [
        vec![0.0; 3],
        vec![0.0; 3],
        vec![0.0; 3],
        vec![0.0; 3],
        vec![0.6, 0.0, 0.8],
    ];
    let got = g
        .search_rescored(&[0.0, 0.0, 2.0], 5, None, None, &Full(&full), 10)
        .unwrap();
    assert!(
        (got[0].score - 0.8).abs() < 1e-6,
        "the full vector's score is exact"
    );

    let bad = HnswParams {
        m: 1,
        m_max0: 0,
        ef_search: 0,
        ml: f64::NAN,
        ..HnswParams::default()
    };
    match Hnsw::new(0, bad).unwrap_err() {
        Error::InvalidOptions(problems) => assert_eq!(problems.len(), 5, "{problems:?}"),
        e => panic!("{e}"),
    }
}

#[test]
fn only_the_search_ef_changes_on_a_built_graph() {
    let mut g = Hnsw::new(3, HnswParams::default()).unwrap();
    g.set_ef_search(7).unwrap();
    assert_eq!(g.params().ef_search, 7);
    for bad in [0, super::hnsw::MAX_EF + 1] {
        assert!(matches!(
            g.set_ef_search(bad),
            Err(Error::InvalidOptions(_))
        ));
    }
    assert_eq!(g.params().ef_search, 7);
}

fn encoded(g: &Hnsw) -> Vec<u8> {
    let mut out = Vec::new();
    g.write_to(&mut out).unwrap();
    out
}

fn decode(bytes: &[u8]) -> Result<Hnsw, Error> {
    Hnsw::read_from(bytes, Path::new("graph.hnsw"))
}

#[test]
fn single_threaded_builds_are_deterministic() {
    let seed = 0xde7;
    let data = embeddings(1500, 16, seed);
    let a = encoded(&build(&data, params(seed), 1));
    let b = encoded(&build(&data, params(seed), 1));
    assert!(a == b, "same seed and order, different graphs");
    let c = encoded(&build(&data, params(seed + 1), 1));
    assert!(a != c);
}

#[test]
fn persistence_round_trip_gives_identical_results() {
    let seed = 0x9e55;
    let (n, dim) = (3000, 32);
    let data = embeddings(n + 50, dim, seed);
    let (data, queries) = data.split_at(n);
    let g = build(data, params(seed), 2);
    for i in (0..n as u32).step_by(9) {
        g.mark_deleted(NodeId(i)).unwrap();
    }
    let bytes = encoded(&g);
    let h = decode(&bytes).unwrap();
    assert_eq!(encoded(&h), bytes, "a loaded graph writes the same file");
    assert_eq!(
        (h.len(), h.deleted_count(), h.entry_point(), *h.params()),
        (g.len(), g.deleted_count(), g.entry_point(), *g.params())
    );
    let keep = |id: NodeId| id.0 % 5 != 1;
    for q in queries {
        assert_eq!(
            g.search(q, 10, Some(40), None).unwrap(),
            h.search(q, 10, Some(40), None).unwrap()
        );
        assert_eq!(
            g.search(q, 5, None, Some(&keep)).unwrap(),
            h.search(q, 5, None, Some(&keep)).unwrap()
        );
    }
    // A loaded graph takes new nodes like any other.
    h.insert(NodeId(n as u32), &queries[0]).unwrap();
    assert_eq!(
        h.search(&queries[0], 1, None, None).unwrap()[0].id,
        NodeId(n as u32)
    );

    let empty = Hnsw::new(dim, params(seed)).unwrap();
    let back = decode(&encoded(&empty)).unwrap();
    assert!(back.is_empty() && back.entry_point().is_none());
}

/// Every truncation and every flipped byte of a small graph file is a `Corruption`, never a
/// panic and never a graph.
#[test]
fn damaged_files_are_corruption_never_panics() {
    let seed = 0xda3a9e;
    let data = embeddings(60, 4, seed);
    let g = build(
        &data,
        HnswParams {
            seed,
            ..HnswParams::with_m(4)
        },
        1,
    );
    g.mark_deleted(NodeId(7)).unwrap();
    let bytes = encoded(&g);
    println!("seed {seed:#x}: graph file of {} bytes", bytes.len());
    assert!(decode(&bytes).is_ok());
    for len in 0..bytes.len() {
        match decode(&bytes[..len]) {
            Err(e) if e.is_corruption() => {}
            Err(e) => panic!("truncated to {len}: not a corruption: {e}"),
            Ok(_) => panic!("truncated to {len}: decoded"),
        }
    }
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] ^= mask;
            match decode(&bad) {
                Err(e) if e.is_corruption() => {}
                Err(e) => panic!("byte {at} ^ {mask:#x}: not a corruption: {e}"),
                Ok(_) => panic!("byte {at} ^ {mask:#x}: decoded"),
            }
        }
    }
}

/// Rewrite the checksum so that damage reaches the structural checks behind it.
fn resealed(mut body: Vec<u8>) -> Vec<u8> {
    let crc = shale::inspect::codec::mask_crc(shale::inspect::codec::crc32c(&body));
    body.extend_from_slice(&crc.to_le_bytes());
    body
}

#[test]
fn well_checksummed_but_malformed_graphs_are_corruption() {
    // Two nodes of dim 1 at level 0, linked to each other: 68-byte header, then per node
    // id(4) flags(1) level(1) code(12) count(1) neighbour(4) = 23 bytes.
    let g = Hnsw::new(
        1,
        HnswParams {
            ml: 1e-9, // every node on level 0
            ..HnswParams::with_m(4)
        },
    )
    .unwrap();
    g.insert(NodeId(0), &[1.0]).unwrap();
    g.insert(NodeId(1), &[-1.0]).unwrap();
    let bytes = encoded(&g);
    assert_eq!(bytes.len(), 68 + 2 * 23 + 4);
    let body = bytes[..bytes.len() - 4].to_vec();
    assert!(decode(&resealed(body.clone())).is_ok());

    let cases: [(&str, usize, &[u8]); 13] = [
        ("link to a missing node", 68 + 19, &[9, 0, 0, 0]),
        ("link to itself", 68 + 19, &[0, 0, 0, 0]),
        ("ids out of order", 68 + 23, &[0, 0, 0, 0]),
        ("unknown flag", 68 + 4, &[2]),
        ("level 1 without its list", 68 + 5, &[1]),
        ("entry point not a node", 60, &[5, 0, 0, 0]),
        ("unknown metric", 64, &[3]),
        ("unknown code kind", 65, &[2]),
        ("reserved bits", 66, &[1]),
        ("a code component never written", 68 + 6, &[0]),
        ("code padding", 68 + 7, &[1]),
        ("a zero scale", 68 + 10, &[0, 0, 0, 0]),
        (
            "a cosine vector not of unit length",
            68 + 14,
            &[0, 0, 0, 0x40],
        ),
    ];
    for (what, at, patch) in cases {
        let mut bad = body.clone();
        bad[at..at + patch.len()].copy_from_slice(patch);
        let err = decode(&resealed(bad))
            .err()
            .unwrap_or_else(|| panic!("{what}: decoded"));
        assert!(err.is_corruption(), "{what}: {err}");
        println!("{what}: {err}");
    }
    let mut long = body.clone();
    long.push(0);
    assert!(decode(&resealed(long)).unwrap_err().is_corruption());
    let mut params = body;
    params[16..20].copy_from_slice(&0u32.to_le_bytes()); // m = 0
    assert!(decode(&resealed(params)).unwrap_err().is_corruption());
}

/// A file written while other threads insert and delete is always one consistent graph.
#[test]
fn snapshots_taken_during_inserts_always_load() {
    let seed = 0x5a4;
    let (n, dim) = (4000, 16);
    let data = embeddings(n, dim, seed);
    let g = Hnsw::new(dim, params(seed)).unwrap();
    let ids: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let done = AtomicBool::new(false);
    let mut snapshots = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            g.insert_all(&ids, |id| data.get(id.0 as usize).map(|v| &v[..]), 2)
                .unwrap();
            done.store(true, Ordering::Release);
        });
        while !done.load(Ordering::Acquire) {
            let _ = g.mark_deleted(NodeId(snapshots * 7 % n as u32));
            let bytes = encoded(&g);
            let h = decode(&bytes).unwrap_or_else(|e| panic!("snapshot {snapshots}: {e}"));
            assert!(h.len() <= n);
            snapshots += 1;
        }
    });
    println!("seed {seed:#x}: {snapshots} snapshots during the build all loaded");
    assert_eq!(decode(&encoded(&g)).unwrap().len(), n);
}
