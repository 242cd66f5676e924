//! Similarity between vectors.
//!
//! Every vector the index stores or is asked about is unit length, so cosine similarity is
//! the dot product and the graph never divides by a norm. The graph code wants a distance
//! (smaller is closer) for its heaps; [`distance`] is the negated dot product: it orders pairs
//! exactly as cosine similarity does, reversed, and because negation is exact in floating
//! point a score recovered from it is bit for bit the score exact search computes.

/// Lanes summed independently. Sixteen `f32`s are two AVX or four SSE registers: enough
/// independent accumulators to hide the latency of the adds, and because each lane only ever
/// adds to itself the compiler may vectorise the loop without reassociating floating-point
/// sums (which it must not do on its own).
const LANES: usize = 16;

/// Dot product of `a` and `b`. Extra elements of the longer slice are ignored.
///
/// The sum is taken in a fixed order for a given length, so the result is the same on every
/// call (the graph and exact search agree to the last bit on the same pair).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { dot_avx2(a, b) };
    }
    dot_lanes(a, b)
}

/// [`dot_lanes`] compiled for AVX2: eight lanes an instruction instead of SSE's four. The
/// same lanes summed in the same order, so the result is bit for bit the portable one (Rust
/// never fuses a multiply and an add on its own).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    dot_lanes(a, b)
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
    let mut tail = 0.0f32;
    for (&x, &y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    // A plain left-to-right sum of the lanes. (A pairwise tree here made the compiler
    // vectorise the main loop two lanes wide instead of eight.)
    acc.iter().sum::<f32>() + tail
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

/// Scale `v` to unit length in place.
///
/// Returns `false` (leaving `v` unchanged) for a vector that has no direction: all zeros,
/// or with a NaN or infinite component.
pub fn normalize(v: &mut [f32]) -> bool {
    if v.iter().any(|x| !x.is_finite()) {
        return false;
    }
    // Accumulate in f64: a 384-d vector of large components must not overflow or lose the
    // small ones.
    let norm2: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
    if !(norm2 > 0.0 && norm2.is_finite()) {
        return false;
    }
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
