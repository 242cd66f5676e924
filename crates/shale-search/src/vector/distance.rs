//! Similarity between vectors.
//!
//! Every vector the index stores or is asked about is unit length, so cosine similarity is
//! the dot product and the graph never divides by a norm. The graph code wants a distance
//! (smaller is closer) for its heaps; [`distance`] is the negated dot product: it orders pairs
//! exactly as cosine similarity does, reversed, and because negation is exact in floating
//! point a score recovered from it is bit for bit the score exact search computes.

/// Lanes summed independently. Sixteen `f32`s are two AVX or four SSE registers: enough
/// independent accumulators to hide the latency of the adds, and because each lane only ever
/// adds to itself, the same sums can be taken by SIMD registers or by scalar code.
const LANES: usize = 16;

/// Dot product of `a` and `b`. Extra elements of the longer slice are ignored.
///
/// The sum is taken in a fixed order for a given length, so the result is the same on every
/// call and on every path (the graph and exact search agree to the last bit on the same
/// pair): lane `j` accumulates the products of elements `j, j + 16, j + 32, ..`; the lanes are
/// then folded in halves (`lane j += lane j + 8`, then `+ 4`, `+ 2`, `+ 1`), which is four
/// dependent adds where a left-to-right sum would be fifteen; the leftover elements past the
/// last whole group of 16 are added one by one and their sum added last. For 50-dimensional
/// vectors the reduction is a third of the work, so its depth matters.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { dot_avx2(a, b) };
    }
    dot_lanes(a, b)
}

/// [`dot_lanes`] with AVX2 registers: lanes 0..8 in one register, 8..16 in the other, each
/// product a separate multiply and add (no fused multiply-add, which rounds once instead of
/// twice), and the fold done by register halves, so the result is the portable one bit for
/// bit.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_castps256_ps128, _mm256_extractf128_ps, _mm256_loadu_ps,
        _mm256_mul_ps, _mm256_setzero_ps, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_movehdup_ps,
        _mm_movehl_ps,
    };
    let n = a.len().min(b.len());
    let (a, b) = (a.get(..n).unwrap_or(&[]), b.get(..n).unwrap_or(&[]));
    let (ca, ra) = a.as_chunks::<LANES>();
    let (cb, rb) = b.as_chunks::<LANES>();
    let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for (x, y) in ca.iter().zip(cb) {
        // SAFETY: each chunk is 16 f32s, so both 8-wide unaligned loads are in bounds.
        unsafe {
            let p = x.as_ptr();
            let q = y.as_ptr();
            lo = _mm256_add_ps(lo, _mm256_mul_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(q)));
            hi = _mm256_add_ps(
                hi,
                _mm256_mul_ps(_mm256_loadu_ps(p.add(8)), _mm256_loadu_ps(q.add(8))),
            );
        }
    }
    let s8 = _mm256_add_ps(lo, hi);
    let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    let s1 = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
    s1 + tail_sum(ra, rb)
}

#[inline(always)]
fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (a.get(..n).unwrap_or(&[]), b.get(..n).unwrap_or(&[]));
    // Fixed-size chunks: the inner loop has a constant trip count, which the compiler
    // unrolls into whole-register multiplies and adds.
    let (ca, ra) = a.as_chunks::<LANES>();
    let (cb, rb) = b.as_chunks::<LANES>();
    let mut acc = [0.0f32; LANES];
    for (x, y) in ca.iter().zip(cb) {
        for ((s, &x), &y) in acc.iter_mut().zip(x).zip(y) {
            *s += x * y;
        }
    }
    let mut width = LANES / 2;
    while width > 0 {
        let (low, high) = acc.split_at_mut(width);
        for (s, &h) in low.iter_mut().zip(high.iter()) {
            *s += h;
        }
        width /= 2;
    }
    acc[0] + tail_sum(ra, rb)
}

/// The elements past the last whole group of [`LANES`], summed left to right.
#[inline(always)]
fn tail_sum(a: &[f32], b: &[f32]) -> f32 {
    let mut tail = 0.0f32;
    for (&x, &y) in a.iter().zip(b) {
        tail += x * y;
    }
    tail
}

/// Cosine similarity of two unit vectors: their dot product, in `[-1, 1]` up to rounding.
#[inline]
pub fn cosine_unit(a: &[f32], b: &[f32]) -> f32 {
    dot(a, b)
}

/// The graph's distance between unit vectors: `-cosine`, in `[-1, 1]` up to rounding.
/// Not a metric (it is negative for close pairs); only its order matters.
#[inline]
pub fn distance(a: &[f32], b: &[f32]) -> f32 {
    -dot(a, b)
}

/// Whether `v` has a direction, so that [`normalize`] accepts it: finite components, not
/// all zero.
pub fn has_direction(v: &[f32]) -> bool {
    norm2(v).is_some()
}

/// The squared length of `v`, if it is finite and not zero.
fn norm2(v: &[f32]) -> Option<f64> {
    if v.iter().any(|x| !x.is_finite()) {
        return None;
    }
    // Accumulate in f64: a 384-d vector of large components must not overflow or lose the
    // small ones.
    let norm2: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
    (norm2 > 0.0 && norm2.is_finite()).then_some(norm2)
}

/// Scale `v` to unit length in place.
///
/// Returns `false` (leaving `v` unchanged) for a vector that has no direction: all zeros,
/// or with a NaN or infinite component.
pub fn normalize(v: &mut [f32]) -> bool {
    let Some(norm2) = norm2(v) else {
        return false;
    };
    let inv = 1.0 / norm2.sqrt();
    for x in v.iter_mut() {
        *x = (f64::from(*x) * inv) as f32;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| f64::from(x) * f64::from(y))
            .sum()
    }

    #[test]
    fn dot_matches_naive_at_every_length() {
        for n in 0..70 {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let got = f64::from(dot(&a, &b));
            assert!((got - naive(&a, &b)).abs() < 1e-4, "n={n}");
            assert_eq!(dot(&a, &b).to_bits(), dot_lanes(&a, &b).to_bits());
        }
    }

    #[test]
    fn normalize_makes_unit_vectors_and_refuses_degenerate_ones() {
        let mut v = vec![3.0, 4.0];
        assert!(normalize(&mut v));
        assert_eq!(v, vec![0.6, 0.8]);
        assert!((distance(&v, &v) + 1.0).abs() < 1e-6);
        assert!(!normalize(&mut [0.0, 0.0]));
        assert!(!normalize(&mut [1.0, f32::NAN]));
        assert!(!normalize(&mut [f32::INFINITY, 1.0]));
    }
}
