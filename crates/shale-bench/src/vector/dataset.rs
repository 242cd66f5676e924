//! A data set of the vector workloads: unit vectors split into the indexed ones and the
//! held-out queries.

use crate::engine::BenchResult;

/// A data set split into indexed vectors and held-out queries, all unit length.
pub struct Dataset {
    /// Short name used in workload names, e.g. `glove100k`.
    pub name: String,
    pub dim: usize,
    pub base: Vec<f32>,
    pub queries: Vec<f32>,
    /// Where the vectors came from, for the notes.
    pub source: String,
}

impl Dataset {
    pub fn len(&self) -> usize {
        self.base.len() / self.dim
    }

    pub fn query_count(&self) -> usize {
        self.queries.len() / self.dim
    }

    /// Unit-length rows of `rows` (zero rows dropped), shuffled by `seed`; the first `n` are
    /// indexed and the next `q` are the queries.
    pub fn split(
        name: String,
        source: String,
        rows: &shale_npy::Array<f32>,
        n: usize,
        q: usize,
        seed: u64,
    ) -> BenchResult<Dataset> {
        let dim = rows.cols;
        let mut order: Vec<usize> = (0..rows.rows).collect();
        let mut rng = crate::gen::Rng::new(seed);
        for i in (1..order.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let mut picked = Vec::with_capacity((n + q) * dim);
        let mut count = 0;
        for &i in &order {
            if count == n + q {
                break;
            }
            let mut v = rows.row(i).to_vec();
            if shale_search::vector::distance::normalize(&mut v) {
                picked.extend_from_slice(&v);
                count += 1;
            }
        }
        if count < n + q {
            return Err(format!("{source}: {count} usable rows, need {n} + {q} queries").into());
        }
        let queries = picked.split_off(n * dim);
        Ok(Dataset {
            name,
            dim,
            base: picked,
            queries,
            source,
        })
    }
}
