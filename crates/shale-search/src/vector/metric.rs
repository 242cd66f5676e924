//! How two vectors compare: [`Metric`], the one place that says what a score means.
//!
//! Every search in Shale ranks by a **score**, higher is closer, whatever the metric:
//!
//! | metric | vectors stored | score of `q` and `x` |
//! |---|---|---|
//! | `Cosine` | scaled to unit length on the way in | `q · x`, the cosine similarity, in `[-1, 1]` |
//! | `Dot` | as given | `q · x`, the inner product (maximum inner product search) |
//! | `L2` | as given | `-‖q - x‖²`, the negated squared Euclidean distance |
//!
//! One convention for all three keeps the graph code free of metric branches: it orders by
//! `-score` (its distance) everywhere.

use super::distance::{dot, has_direction, normalize};
use shale::error::{Error, Result};

/// How vectors are compared. See the module documentation for the score of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Metric {
    /// Cosine similarity: vectors are scaled to unit length when they are stored and when
    /// they are asked about, so the score is their dot product.
    #[default]
    Cosine,
    /// The inner product of the vectors as given (maximum inner product search).
    Dot,
    /// Euclidean distance; the score is `-‖q - x‖²`.
    L2,
}

impl Metric {
    /// The score of `a` and `b` (of one length) under this metric, computed in full
    /// precision. For `Cosine` both must already be unit length.
    #[inline]
    pub fn score(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Metric::Cosine | Metric::Dot => dot(a, b),
            Metric::L2 => -squared_l2(a, b),
        }
    }

    /// True if vectors are scaled to unit length before they are stored or compared.
    pub fn normalizes(self) -> bool {
        self == Metric::Cosine
    }

    /// `v` as the index stores and compares it: unit length for `Cosine`, as given
    /// otherwise.
    ///
    /// # Errors
    /// `InvalidArgument` naming `what` if `v` has another length than `dim`, a NaN or
    /// infinite component, or (for `Cosine`) no direction.
    pub fn prepare(self, v: &[f32], dim: usize, what: &str) -> Result<Vec<f32>> {
        check_components(v, dim, what)?;
        let mut u = v.to_vec();
        if self.normalizes() && !normalize(&mut u) {
            return Err(no_direction(what));
        }
        Ok(u)
    }

    /// What [`Metric::prepare`] checks, without making the prepared copy.
    ///
    /// # Errors
    /// As [`Metric::prepare`].
    pub fn check(self, v: &[f32], dim: usize, what: &str) -> Result<()> {
        check_components(v, dim, what)?;
        if self.normalizes() && !has_direction(v) {
            return Err(no_direction(what));
        }
        Ok(())
    }

    /// The byte that names this metric in files (docs/format.md).
    pub fn tag(self) -> u8 {
        match self {
            Metric::Cosine => 0,
            Metric::Dot => 1,
            Metric::L2 => 2,
        }
    }

    /// The metric a file's byte names, if any.
    pub fn from_tag(tag: u8) -> Option<Metric> {
        match tag {
            0 => Some(Metric::Cosine),
            1 => Some(Metric::Dot),
            2 => Some(Metric::L2),
            _ => None,
        }
    }

    /// The lower-case name used by the CLI and Python (`cosine`, `dot`, `l2`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::Dot => "dot",
            Metric::L2 => "l2",
        }
    }

    /// The metric named `name` (as [`Metric::name`] spells it).
    ///
    /// # Errors
    /// `InvalidArgument` for any other name.
    pub fn parse(name: &str) -> Result<Metric> {
        match name {
            "cosine" => Ok(Metric::Cosine),
            "dot" | "ip" => Ok(Metric::Dot),
            "l2" => Ok(Metric::L2),
            other => Err(Error::invalid(format!(
                "unknown metric {other:?} (cosine, dot or l2)"
            ))),
        }
    }
}

/// `‖a - b‖²`, summed in `f32` lanes like [`dot`].
#[inline]
pub fn squared_l2(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let n = a.len().min(b.len());
    let (a, b) = (a.get(..n).unwrap_or(&[]), b.get(..n).unwrap_or(&[]));
    let (ca, ra) = a.as_chunks::<LANES>();
    let (cb, rb) = b.as_chunks::<LANES>();
    let mut acc = [0.0f32; LANES];
    for (x, y) in ca.iter().zip(cb) {
        for ((s, &x), &y) in acc.iter_mut().zip(x).zip(y) {
            let d = x - y;
            *s += d * d;
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for (&x, &y) in ra.iter().zip(rb) {
        let d = x - y;
        sum += d * d;
    }
    sum
}

/// `v` has `dim` components, every one finite.
fn check_components(v: &[f32], dim: usize, what: &str) -> Result<()> {
    if v.len() != dim {
        return Err(Error::invalid(format!(
            "{what} has {} dimensions, the index has {dim}",
            v.len()
        )));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(Error::invalid(format!(
            "{what} has a NaN or infinite component"
        )));
    }
    Ok(())
}

fn no_direction(what: &str) -> Error {
    Error::invalid(format!(
        "{what} is all zeros, which has no direction for the cosine metric"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_higher_for_closer_vectors_under_every_metric() {
        let q = [1.0f32, 0.0];
        let near = [0.9f32, 0.1];
        let far = [-1.0f32, 0.5];
        for m in [Metric::Cosine, Metric::Dot, Metric::L2] {
            assert!(m.score(&q, &near) > m.score(&q, &far), "{m:?}");
        }
        assert_eq!(Metric::L2.score(&[1.0, 2.0], &[4.0, 6.0]), -25.0);
    }

    #[test]
    fn check_refuses_what_prepare_refuses() {
        let cases: [&[f32]; 5] = [
            &[1.0, 2.0],
            &[1.0],
            &[0.0, 0.0],
            &[f32::NAN, 1.0],
            &[f32::INFINITY, 1.0],
        ];
        for m in [Metric::Cosine, Metric::Dot, Metric::L2] {
            for v in cases {
                let prepared = m.prepare(v, 2, "v").map(drop).map_err(|e| e.to_string());
                let checked = m.check(v, 2, "v").map_err(|e| e.to_string());
                assert_eq!(checked, prepared, "{m:?} {v:?}");
            }
        }
        assert!(Metric::Cosine.check(&[0.0, 0.0], 2, "v").is_err());
        assert!(Metric::Dot.check(&[0.0, 0.0], 2, "v").is_ok());
    }

    #[test]
    fn tags_and_names_round_trip() {
        for m in [Metric::Cosine, Metric::Dot, Metric::L2] {
            assert_eq!(Metric::from_tag(m.tag()), Some(m));
            assert_eq!(Metric::parse(m.name()).unwrap(), m);
        }
        assert_eq!(Metric::from_tag(3), None);
        assert!(Metric::parse("hamming").is_err());
    }

    #[test]
    fn prepare_checks_and_normalises() {
        assert_eq!(
            Metric::Cosine.prepare(&[3.0, 4.0], 2, "v").unwrap(),
            [0.6, 0.8]
        );
        assert_eq!(
            Metric::Dot.prepare(&[3.0, 4.0], 2, "v").unwrap(),
            [3.0, 4.0]
        );
        assert!(Metric::Cosine.prepare(&[0.0, 0.0], 2, "v").is_err());
        assert!(Metric::L2.prepare(&[0.0, 0.0], 2, "v").is_ok());
        assert!(Metric::L2.prepare(&[f32::NAN, 0.0], 2, "v").is_err());
        assert!(Metric::Dot.prepare(&[1.0], 2, "v").is_err());
    }
}
