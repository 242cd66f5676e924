//! int8 codes: what the HNSW graph keeps of each vector, and scores in its hot loop.
//!
//! A vector `x` of `dim` components is stored as one byte per component plus eight bytes:
//!
//! ```text
//!   code := u8{dim} pad{0..3} scale:f32 norm2:f32
//!   u_i   = round(x_i / scale) + 128        scale = max_i |x_i| / 127, u_i in 1..=255
//!   norm2 = ‖x‖² of the full-precision vector
//! ```
//!
//! A query `q` is quantized once per search the same way, to signed bytes
//! `r_i = round(q_i / t)` with `t = max_i |q_i| / 127`. Then
//!
//! ```text
//!   q · x  ≈  t · scale · Σ r_i (u_i - 128)  =  t · scale · (Σ u_i r_i  -  128 Σ r_i)
//! ```
//!
//! `Σ u_i r_i` is one unsigned-by-signed byte dot product, which AVX-512 VNNI
//! (`vpdpbusd`) computes 64 components per instruction, and `128 Σ r_i` is fixed for the
//! query. A 384-dimensional vector is 392 bytes (a quarter of its `f32`s), so a search
//! touches a quarter of the memory and scores with a few instructions per neighbour.
//!
//! The scale is per vector, so no training pass is needed and a stream of inserts never
//! has to re-encode anything; the price is that a vector far from the origin in every
//! component (large common offset) is coded coarsely, which matters for `L2` on data that
//! is not centred. The codes rank candidates; callers that need exact scores re-score the
//! few they return with the full vectors (the semantic index does, from its store).
//!
//! Thread safety: plain functions and immutable values; [`Kernel`] is chosen once per
//! process from what the CPU supports.

use std::sync::OnceLock;

use super::Metric;

/// Bytes of a code after its `dim` component bytes (and padding): `scale`, `norm2`.
const META_BYTES: usize = 8;

/// Bytes one vector's code takes: its components, padded to a multiple of four so that
/// the metadata is aligned, then the metadata.
pub fn code_len(dim: usize) -> usize {
    dim.next_multiple_of(4) + META_BYTES
}

/// Encode `x` (already as the metric stores it: see [`Metric::prepare`]) into `out`,
/// which holds [`code_len`]`(x.len())` bytes.
pub fn encode(x: &[f32], out: &mut [u8]) {
    let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    let inv = 1.0 / scale;
    let (codes, meta) = out.split_at_mut(out.len().saturating_sub(META_BYTES));
    codes.fill(0);
    for (u, &v) in codes.iter_mut().zip(x) {
        *u = (quantize(v, inv) + 128) as u8;
    }
    let norm2: f64 = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    if let Some((s, n)) = meta.split_first_chunk_mut::<4>() {
        *s = scale.to_le_bytes();
        if let Some(n) = n.first_chunk_mut::<4>() {
            *n = (norm2 as f32).to_le_bytes();
        }
    }
}

/// `v · inv` rounded half away from zero (as `f32::round` rounds) and kept to
/// -127..=127 (it is there by construction of `inv`; the clamp only guards rounding). In
/// integer arithmetic: `round` is a library call on the baseline x86-64 target, and this
/// compiles to conversions and compares that the compiler vectorizes.
#[inline]
fn quantize(v: f32, inv: f32) -> i32 {
    let x = (v * inv).clamp(-127.0, 127.0);
    let toward_zero = x as i32;
    // Exact: |x| <= 127, so its fraction takes no rounding.
    let fraction = x - toward_zero as f32;
    toward_zero + i32::from(fraction >= 0.5) - i32::from(fraction <= -0.5)
}

/// `(scale, norm2)` of a code.
#[inline]
fn meta(code: &[u8]) -> (f32, f32) {
    let tail = code.len().saturating_sub(META_BYTES);
    let word = |at: usize| {
        code.get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map_or(0.0, f32::from_le_bytes)
    };
    (word(tail), word(tail + 4))
}

/// The full-precision vector a code stands for, approximately (`dim` components).
pub fn decode(code: &[u8], dim: usize) -> Vec<f32> {
    let (scale, _) = meta(code);
    code.iter()
        .take(dim)
        .map(|&u| f32::from(u as i16 - 128) * scale)
        .collect()
}

/// A query prepared for scoring codes: its signed bytes, scale and the constant terms.
#[derive(Debug, Clone)]
pub struct Query {
    r: Vec<i8>,
    scale: f32,
    /// `128 · Σ r_i`, subtracted from every raw dot product.
    bias: i32,
    norm2: f32,
    metric: Metric,
    kernel: Kernel,
}

impl Query {
    /// Quantize `q` (already as the metric compares it: see [`Metric::prepare`]).
    pub fn new(q: &[f32], metric: Metric) -> Query {
        let max = q.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
        let inv = 1.0 / scale;
        let r: Vec<i8> = q.iter().map(|&v| quantize(v, inv) as i8).collect();
        let norm2: f64 = q.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        Query::from_parts(r, scale, norm2 as f32, metric)
    }

    /// The query a stored code stands for: scoring it against another code compares two
    /// stored vectors (the graph's neighbour selection does).
    pub fn from_code(code: &[u8], dim: usize, metric: Metric) -> Query {
        let (scale, norm2) = meta(code);
        let r = code.iter().take(dim).map(|&u| (u ^ 0x80) as i8).collect();
        Query::from_parts(r, scale, norm2, metric)
    }

    fn from_parts(r: Vec<i8>, scale: f32, norm2: f32, metric: Metric) -> Query {
        let bias = 128 * r.iter().map(|&v| i32::from(v)).sum::<i32>();
        Query {
            r,
            scale,
            bias,
            norm2,
            metric,
            kernel: Kernel::get(),
        }
    }

    /// The approximate score (higher is closer) of this query and the vector `code`
    /// stands for.
    #[inline]
    pub fn score(&self, code: &[u8]) -> f32 {
        self.finish(self.kernel.dot(code, &self.r), code)
    }

    /// [`Query::score`] of each of `codes`, into `out` (cleared first): one call into the
    /// kernel for the batch, so the sums of different codes overlap in the CPU.
    pub fn score_all(&self, codes: &[&[u8]], out: &mut Vec<f32>) {
        out.clear();
        self.score_more(codes, out);
    }

    /// [`Query::score_all`], appending to `out`.
    pub fn score_more(&self, codes: &[&[u8]], out: &mut Vec<f32>) {
        let mut raw = [0i32; 64];
        for batch in codes.chunks(raw.len()) {
            let raw = raw.get_mut(..batch.len()).unwrap_or_default();
            self.kernel.dots(batch, &self.r, raw);
            out.extend(
                batch
                    .iter()
                    .zip(raw.iter())
                    .map(|(code, &raw)| self.finish(raw, code)),
            );
        }
    }

    /// The score from the raw byte dot product `raw` of this query with `code`.
    #[inline]
    fn finish(&self, raw: i32, code: &[u8]) -> f32 {
        let (scale, norm2) = meta(code);
        let dot = (raw - self.bias) as f32 * self.scale * scale;
        match self.metric {
            Metric::Cosine | Metric::Dot => dot,
            Metric::L2 => 2.0 * dot - norm2 - self.norm2,
        }
    }
}

/// The unsigned-by-signed byte dot product `Σ u_i r_i` over `r.len()` components, the
/// best way this CPU has.
#[derive(Clone, Copy)]
pub struct Kernel {
    /// Safe to call only as [`Kernel::get`] chose it: it may use instructions that only
    /// that check found.
    dot: unsafe fn(&[u8], &[i8]) -> i32,
    /// The same over many codes at once (see [`Kernel::dots`]), under the same rule.
    dots: unsafe fn(&[&[u8]], &[i8], &mut [i32]),
    name: &'static str,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Kernel {
    /// The kernel for this CPU, chosen on first use.
    pub fn get() -> Kernel {
        static CHOSEN: OnceLock<Kernel> = OnceLock::new();
        *CHOSEN.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                if std::arch::is_x86_feature_detected!("avx512vnni")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                {
                    return Kernel {
                        dot: x86::dot_avx512_vnni,
                        dots: x86::dots_avx512_vnni,
                        name: "avx512-vnni",
                    };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    return Kernel {
                        dot: x86::dot_avx2,
                        dots: x86::dots_avx2,
                        name: "avx2",
                    };
                }
            }
            Kernel {
                dot: dot_portable,
                dots: dots_portable,
                name: "portable",
            }
        })
    }

    /// Which implementation runs (`avx512-vnni`, `avx2` or `portable`), for reports.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// `Σ u_i r_i` for `i < r.len()`; `u` must be at least as long as `r`.
    #[inline]
    pub fn dot(&self, u: &[u8], r: &[i8]) -> i32 {
        if u.len() < r.len() {
            return dot_portable(u, r);
        }
        // SAFETY: `dot` was chosen by `Kernel::get` after checking that the CPU has every
        // instruction it uses; the kernels read `r.len()` bytes of each slice, and `u` has
        // at least that many (checked above).
        unsafe { (self.dot)(u, r) }
    }

    /// `out[j] = Σ u_i r_i` with `u = codes[j]`, for `j < out.len().min(codes.len())`; a
    /// code shorter than `r` gets the portable sum.
    #[inline]
    pub fn dots(&self, codes: &[&[u8]], r: &[i8], out: &mut [i32]) {
        if codes.iter().any(|u| u.len() < r.len()) {
            dots_portable(codes, r, out);
            return;
        }
        // SAFETY: as in `dot`, for every code (all checked above).
        unsafe { (self.dots)(codes, r, out) }
    }
}

fn dots_portable(codes: &[&[u8]], r: &[i8], out: &mut [i32]) {
    for (o, u) in out.iter_mut().zip(codes) {
        *o = dot_portable(u, r);
    }
}

/// `Σ u_i r_i` in plain Rust: the reference the SIMD kernels must match exactly.
fn dot_portable(u: &[u8], r: &[i8]) -> i32 {
    u.iter()
        .zip(r)
        .map(|(&a, &b)| i32::from(a) * i32::from(b))
        .sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// 64 components per `vpdpbusd`; the tail is loaded with a mask, which reads no byte
    /// past `r.len()`.
    ///
    /// # Safety
    /// The CPU must have AVX-512F, AVX-512BW and AVX-512 VNNI, and `u.len() >= r.len()`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    pub(super) unsafe fn dot_avx512_vnni(u: &[u8], r: &[i8]) -> i32 {
        // SAFETY: the caller's contract.
        _mm512_reduce_add_epi32(unsafe { lanes_avx512_vnni(u, r) })
    }

    /// The sum of [`dot_avx512_vnni`] spread over 16 lanes, not yet added up.
    ///
    /// # Safety
    /// As [`dot_avx512_vnni`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    #[inline]
    unsafe fn lanes_avx512_vnni(u: &[u8], r: &[i8]) -> __m512i {
        let n = r.len();
        let (pu, pr) = (u.as_ptr(), r.as_ptr());
        let mut acc = _mm512_setzero_si512();
        let mut i = 0;
        while i + 64 <= n {
            // SAFETY: `i + 64 <= n <= u.len()`, so both 64-byte loads are in bounds.
            let (a, b) = unsafe {
                (
                    _mm512_loadu_si512(pu.add(i).cast()),
                    _mm512_loadu_si512(pr.add(i).cast()),
                )
            };
            acc = _mm512_dpbusd_epi32(acc, a, b);
            i += 64;
        }
        if i < n {
            let mask: __mmask64 = (1u64 << (n - i)) - 1;
            // SAFETY: a masked load touches only the bytes its mask selects, the `n - i`
            // bytes left in each slice.
            let (a, b) = unsafe {
                (
                    _mm512_maskz_loadu_epi8(mask, pu.add(i).cast()),
                    _mm512_maskz_loadu_epi8(mask, pr.add(i).cast()),
                )
            };
            acc = _mm512_dpbusd_epi32(acc, a, b);
        }
        acc
    }

    /// The four sums of the lanes of `a`, `b`, `c` and `d`, in that order: a transpose by
    /// unpacks adds them up together, a third of the work of four separate reductions
    /// (which dominate the cost of a short code's dot product).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn add_up_4(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m128i {
        // Per 128-bit block: [a0+a2, b0+b2, a1+a3, b1+b3], then the same for c and d.
        let ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
        let cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
        // Per 128-bit block: [a, b, c, d], each the sum of that block's four lanes.
        let abcd = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
        let half = _mm256_add_epi32(
            _mm512_castsi512_si256(abcd),
            _mm512_extracti64x4_epi64::<1>(abcd),
        );
        _mm_add_epi32(
            _mm256_castsi256_si128(half),
            _mm256_extracti128_si256::<1>(half),
        )
    }

    /// [`dot_avx512_vnni`] for each code, four at a time with one reduction between them.
    ///
    /// # Safety
    /// As [`dot_avx512_vnni`], for every code.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn dots_avx512_vnni(codes: &[&[u8]], r: &[i8], out: &mut [i32]) {
        let n = codes.len().min(out.len());
        let (Some(out), Some(codes)) = (out.get_mut(..n), codes.get(..n)) else {
            return;
        };
        let mut quads = out.chunks_exact_mut(4);
        let mut code_quads = codes.chunks_exact(4);
        for (o, u) in quads.by_ref().zip(code_quads.by_ref()) {
            if let ([o0, o1, o2, o3], [u0, u1, u2, u3]) = (o, u) {
                // SAFETY: the caller's contract, for these codes.
                let sums = unsafe {
                    add_up_4(
                        lanes_avx512_vnni(u0, r),
                        lanes_avx512_vnni(u1, r),
                        lanes_avx512_vnni(u2, r),
                        lanes_avx512_vnni(u3, r),
                    )
                };
                let mut four = [0i32; 4];
                // SAFETY: `four` is 16 bytes, the width of the store.
                unsafe { _mm_storeu_si128(four.as_mut_ptr().cast(), sums) };
                [*o0, *o1, *o2, *o3] = four;
            }
        }
        let rest = quads.into_remainder().iter_mut();
        for (o, u) in rest.zip(code_quads.remainder()) {
            // SAFETY: the caller's contract, for this code.
            *o = unsafe { dot_avx512_vnni(u, r) };
        }
    }

    /// [`dot_avx2`] for each code.
    ///
    /// # Safety
    /// As [`dot_avx2`], for every code.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dots_avx2(codes: &[&[u8]], r: &[i8], out: &mut [i32]) {
        for (o, u) in out.iter_mut().zip(codes) {
            // SAFETY: the caller's contract, for this code.
            *o = unsafe { dot_avx2(u, r) };
        }
    }

    /// 16 components per step: both sides widened to 16 bits and multiplied in pairs
    /// (`vpmaddwd`), which cannot saturate (`255 * 127 * 2` fits an `i32`).
    ///
    /// # Safety
    /// The CPU must have AVX2, and `u.len() >= r.len()`.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn dot_avx2(u: &[u8], r: &[i8]) -> i32 {
        let n = r.len();
        let (pu, pr) = (u.as_ptr(), r.as_ptr());
        let mut acc = _mm256_setzero_si256();
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: `i + 16 <= n <= u.len()`, so both 16-byte loads are in bounds.
            let (a, b) = unsafe {
                (
                    _mm_loadu_si128(pu.add(i).cast()),
                    _mm_loadu_si128(pr.add(i).cast()),
                )
            };
            let prod = _mm256_madd_epi16(_mm256_cvtepu8_epi16(a), _mm256_cvtepi8_epi16(b));
            acc = _mm256_add_epi32(acc, prod);
            i += 16;
        }
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` is 32 bytes, the width of the store.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), acc) };
        let tail = super::dot_portable(
            u.get(i..n).unwrap_or_default(),
            r.get(i..n).unwrap_or_default(),
        );
        lanes.iter().sum::<i32>() + tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::distance::{dot, normalize};

    #[test]
    fn quantize_rounds_as_round_does() {
        let reference = |v: f32, inv: f32| (v * inv).round().clamp(-127.0, 127.0) as i32;
        let mut values: Vec<f32> = (-140_000..=140_000).map(|i| i as f32 / 1000.0).collect();
        for h in -130..=130 {
            let half = h as f32 + 0.5;
            values.extend([half, half.next_up(), half.next_down()]);
        }
        values.extend([0.0, -0.0, f32::NAN, 0.499_999_97, -0.499_999_97]);
        for v in values {
            assert_eq!(quantize(v, 1.0), reference(v, 1.0), "{v}");
            assert_eq!(quantize(v, 0.37), reference(v, 0.37), "{v} * 0.37");
        }
    }

    fn vectors(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        (0..n).map(|_| (0..dim).map(|_| next()).collect()).collect()
    }

    #[test]
    fn every_kernel_matches_the_portable_sum_at_every_length() {
        let kernel = Kernel::get();
        println!("kernel: {}", kernel.name());
        for n in 0..200 {
            let u: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
            let r: Vec<i8> = (0..n).map(|i: i32| (i * 91 % 255 - 127) as i8).collect();
            assert_eq!(kernel.dot(&u, &r), dot_portable(&u, &r), "n = {n}");
        }
        let u = vec![255u8; 4096];
        let r = vec![-127i8; 4096];
        assert_eq!(
            kernel.dot(&u, &r),
            -255 * 127 * 4096,
            "extremes do not saturate"
        );
    }

    #[test]
    fn batched_dots_match_single_ones_at_every_batch_size() {
        let kernel = Kernel::get();
        for dim in [1, 7, 50, 64, 65, 130, 384] {
            let r: Vec<i8> = (0..dim).map(|i: i32| (i * 91 % 255 - 127) as i8).collect();
            let codes: Vec<Vec<u8>> = (0..23)
                .map(|c| {
                    (0..dim + 8)
                        .map(|i| ((i * 37 + c * 101) % 256) as u8)
                        .collect()
                })
                .collect();
            for n in 0..codes.len() {
                let batch: Vec<&[u8]> = codes.iter().take(n).map(Vec::as_slice).collect();
                let mut out = vec![i32::MIN; n + 1];
                kernel.dots(&batch, &r, &mut out);
                for (j, code) in batch.iter().enumerate() {
                    assert_eq!(
                        out[j],
                        dot_portable(code, &r),
                        "dim {dim}, batch {n}, code {j}"
                    );
                }
                assert_eq!(
                    out[n],
                    i32::MIN,
                    "dim {dim}, batch {n}: wrote past the batch"
                );
            }
        }
    }

    #[test]
    fn codes_round_trip_within_half_a_step() {
        for dim in [1, 2, 3, 50, 384] {
            for v in vectors(20, dim, dim as u64) {
                let mut code = vec![0u8; code_len(dim)];
                encode(&v, &mut code);
                let back = decode(&code, dim);
                let step = v.iter().fold(0.0f32, |m, x| m.max(x.abs())) / 127.0;
                for (a, b) in v.iter().zip(&back) {
                    assert!((a - b).abs() <= step * 0.5 + 1e-7, "{a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn scores_approximate_full_precision_under_every_metric() {
        let dim = 384;
        let vs = vectors(200, dim, 7);
        for metric in [Metric::Cosine, Metric::Dot, Metric::L2] {
            let prep = |v: &Vec<f32>| {
                let mut v = v.clone();
                if metric.normalizes() {
                    assert!(normalize(&mut v));
                }
                v
            };
            let q = prep(&vs[0]);
            let query = Query::new(&q, metric);
            for v in &vs[1..] {
                let x = prep(v);
                let mut code = vec![0u8; code_len(dim)];
                encode(&x, &mut code);
                let exact = metric.score(&q, &x);
                let approx = query.score(&code);
                let magnitude = match metric {
                    Metric::Cosine => 1.0,
                    Metric::Dot | Metric::L2 => dot(&q, &q).max(dot(&x, &x)),
                };
                assert!(
                    (exact - approx).abs() <= 0.01 * magnitude,
                    "{metric:?}: {exact} vs {approx}"
                );
                // A code read back as a query scores like the vector it stands for.
                let sym = Query::from_code(&code, dim, metric).score(&code);
                let self_score = metric.score(&x, &x);
                assert!((sym - self_score).abs() <= 0.01 * magnitude.max(1.0));
            }
        }
    }

    #[test]
    fn a_zero_vector_encodes_without_dividing_by_zero() {
        let mut code = vec![0u8; code_len(3)];
        encode(&[0.0, 0.0, 0.0], &mut code);
        assert_eq!(decode(&code, 3), [0.0, 0.0, 0.0]);
        assert_eq!(Query::new(&[0.0; 3], Metric::L2).score(&code), 0.0);
    }
}
