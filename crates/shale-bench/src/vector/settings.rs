//! What the HNSW workloads measure, as the command line set it.

use std::path::PathBuf;

use shale_search::vector::HnswParams;

/// What to measure.
pub struct HnswSettings {
    pub m: usize,
    pub ef_construction: usize,
    pub k: usize,
    pub efs: Vec<usize>,
    pub threads: Vec<usize>,
    pub engines: Vec<String>,
    pub seed: u64,
    /// The interpreter with Debian's python3-hnswlib.
    pub python: PathBuf,
    /// The interpreter of the peers venv (faiss-cpu, usearch, rabitqlib).
    pub peer_python: PathBuf,
    pub filter: FilterSettings,
    pub work_dir: PathBuf,
}

impl HnswSettings {
    pub fn params(&self) -> HnswParams {
        HnswParams {
            ef_construction: self.ef_construction,
            seed: self.seed,
            ..HnswParams::with_m(self.m)
        }
    }

    pub fn wants(&self, engine: &str) -> bool {
        self.engines.iter().any(|e| e == engine)
    }
}

/// What the filtered workloads measure.
pub struct FilterSettings {
    /// Share of the vectors admitted, in percent; one workload each.
    pub selectivity_pct: Vec<f64>,
    pub efs: Vec<usize>,
    /// Queries per selectivity: the first of the held-out queries (0: no filtered workloads).
    pub queries: usize,
}
