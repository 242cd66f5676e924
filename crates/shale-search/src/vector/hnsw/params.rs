//! [`HnswParams`]: the graph's parameters with the paper's names, and their limits.

use crate::vector::Metric;
use shale::error::{Error, Result};

/// Largest `m_max` / `m_max0` accepted: lists this long are far past any useful setting and
/// would make a node's memory unreasonable.
pub(super) const MAX_LINKS: usize = 4096;

/// Largest `ef_construction` / `ef_search` accepted (the file stores them as `u32`), and
/// the largest `k` and `ef` a search takes.
pub const MAX_EF: usize = 1 << 24;

/// Largest dimension accepted (the largest embedding models are near 4096).
pub const MAX_DIM: usize = 65_536;

/// The parameters of the graph, with the paper's names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HnswParams {
    /// Neighbours chosen for a new node on each of its levels. Default 16.
    pub m: usize,
    /// Most neighbours a node keeps on levels above 0. Default `m`.
    pub m_max: usize,
    /// Most neighbours a node keeps on level 0. Default `2 * m`.
    pub m_max0: usize,
    /// Candidate list size while inserting. Default 200 (hnswlib's example value).
    pub ef_construction: usize,
    /// Candidate list size while searching when the caller gives none. Default 64.
    pub ef_search: usize,
    /// Level multiplier: a node's level is `floor(-ln(U) * ml)`. Default `1 / ln(m)`.
    pub ml: f64,
    /// Seed of the level generator.
    pub seed: u64,
    /// How vectors compare. Default [`Metric::Cosine`].
    pub metric: Metric,
}

impl HnswParams {
    /// The paper's recommended parameters for a given `m`.
    pub fn with_m(m: usize) -> HnswParams {
        HnswParams {
            m,
            m_max: m,
            m_max0: m.saturating_mul(2),
            ef_construction: 200,
            ef_search: 64,
            ml: 1.0 / (m.max(2) as f64).ln(),
            seed: 0x5eed,
            metric: Metric::Cosine,
        }
    }

    /// Check every parameter, reporting all problems at once.
    ///
    /// # Errors
    /// `Error::InvalidOptions` listing each parameter out of range.
    pub fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        let mut check = |name: &str, value: usize, min: usize, max: usize| {
            if !(min..=max).contains(&value) {
                problems.push(format!("hnsw {name} = {value} (must be {min}..={max})"));
            }
        };
        check("m", self.m, 2, MAX_LINKS);
        check("m_max", self.m_max, 1, MAX_LINKS);
        check("m_max0", self.m_max0, 1, MAX_LINKS);
        check("ef_construction", self.ef_construction, 1, MAX_EF);
        check("ef_search", self.ef_search, 1, MAX_EF);
        if !(self.ml.is_finite() && self.ml > 0.0 && self.ml <= 16.0) {
            problems.push(format!("hnsw ml = {} (must be in (0, 16])", self.ml));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::InvalidOptions(problems))
        }
    }
}

impl Default for HnswParams {
    fn default() -> HnswParams {
        HnswParams::with_m(16)
    }
}
