//! The arithmetic of the forward pass on plain `f32` slices: a dense layer, layer
//! normalisation, GELU and attention. Loops are shaped so the compiler vectorises them
//! (independent accumulators, contiguous rows); no BLAS, no unsafe code.

/// Lanes of the dot product's accumulator: enough independent sums to fill the vector units.
const LANES: usize = 16;

/// The dot product of two equally long slices.
#[inline]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = a.len() / LANES * LANES;
    for (ca, cb) in a[..chunks]
        .chunks_exact(LANES)
        .zip(b[..chunks].chunks_exact(LANES))
    {
        for j in 0..LANES {
            acc[j] += ca[j] * cb[j];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for (x, y) in a[chunks..].iter().zip(&b[chunks..]) {
        sum += x * y;
    }
    sum
}

/// Output columns per packed panel: two AVX registers, or four SSE ones.
const PANEL: usize = 16;
/// Token rows one pass of the kernel computes against a panel.
const ROWS: usize = 4;

/// A dense layer. The weight comes as PyTorch stores it (`outputs` rows of `inputs` floats)
/// and is kept transposed and packed in panels of [`PANEL`] output columns: panel `p` holds,
/// input after input, the weights of outputs `p * PANEL ..` side by side (zeros past the last
/// output). So the kernel reads every weight once per pass, contiguously, and keeps
/// [`ROWS`] × [`PANEL`] sums in registers instead of reducing one dot product per output.
#[derive(Debug)]
pub(crate) struct Linear {
    packed: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Linear {
    /// Packs `weight` (`outputs` × `inputs`, row-major) and keeps `bias` (`outputs`).
    pub(crate) fn new(weight: &[f32], bias: Vec<f32>, inputs: usize, outputs: usize) -> Self {
        let panels = outputs.div_ceil(PANEL);
        let mut packed = vec![0.0f32; panels * inputs * PANEL];
        for (o, row) in weight.chunks_exact(inputs).take(outputs).enumerate() {
            let (p, c) = (o / PANEL, o % PANEL);
            let panel = &mut packed[p * inputs * PANEL..][..inputs * PANEL];
            for (k, w) in row.iter().enumerate() {
                panel[k * PANEL + c] = *w;
            }
        }
        Self {
            packed,
            bias,
            inputs,
            outputs,
        }
    }

    /// `x` (`rows` × `inputs`) times the transposed weight, plus the bias: `rows` × `outputs`.
    pub(crate) fn apply(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let mut y = vec![0.0f32; rows * self.outputs];
        if rows == 0 || self.inputs == 0 || x.len() < rows * self.inputs {
            return y;
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above), the only requirement of a
            // `target_feature` function; its body is safe code.
            #[allow(unsafe_code)]
            unsafe {
                apply_avx2(self, x, rows, &mut y)
            };
            return y;
        }
        kernel(self, x, rows, &mut y);
        y
    }
}

/// [`kernel`] compiled for AVX2: the same loops, eight floats per instruction instead of the
/// four of the SSE2 baseline this crate is otherwise compiled for, and sixteen registers that
/// hold all [`ROWS`] × [`PANEL`] sums. (`f32::mul_add` here measured 6 times slower: it was not
/// turned into vector FMA instructions, so products and sums stay separate, as in the
/// reference.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn apply_avx2(layer: &Linear, x: &[f32], rows: usize, y: &mut [f32]) {
    kernel(layer, x, rows, y);
}

/// `y = x · Wᵀ + b`, [`ROWS`] tokens against one panel at a time: for each input `k`, the
/// panel's [`PANEL`] weights of `k` meet each token's `x[k]`.
#[inline(always)]
fn kernel(layer: &Linear, x: &[f32], rows: usize, y: &mut [f32]) {
    let n = layer.inputs;
    let outputs = layer.outputs;
    for (p, panel) in layer.packed.chunks_exact(n * PANEL).enumerate() {
        let (weights, _) = panel.as_chunks::<PANEL>();
        let c0 = p * PANEL;
        let width = PANEL.min(outputs - c0);
        let bias = &layer.bias[c0..c0 + width];
        for r0 in (0..rows).step_by(ROWS) {
            let taken = ROWS.min(rows - r0);
            // A short last block repeats its last token; those sums are not stored.
            let xs: [&[f32]; ROWS] =
                std::array::from_fn(|r| &x[(r0 + r.min(taken - 1)) * n..][..n]);
            let mut acc = [[0.0f32; PANEL]; ROWS];
            for (k, w) in weights.iter().enumerate() {
                for (sums, xr) in acc.iter_mut().zip(&xs) {
                    let v = xr[k];
                    for (s, w) in sums.iter_mut().zip(w) {
                        *s += v * w;
                    }
                }
            }
            for (r, sums) in acc.iter().take(taken).enumerate() {
                let out = &mut y[(r0 + r) * outputs + c0..][..width];
                for ((o, s), b) in out.iter_mut().zip(sums).zip(bias) {
                    *o = s + b;
                }
            }
        }
    }
}

/// Normalises each row of `x` to mean 0 and variance 1, then scales and shifts it.
pub(crate) fn layer_norm(x: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let dim = weight.len();
    for row in x.chunks_exact_mut(dim) {
        let mean = row.iter().sum::<f32>() / dim as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / dim as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(weight).zip(bias) {
            *v = (*v - mean) * inv * w + b;
        }
    }
}

/// The error function, by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7).
pub(crate) fn erf(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_8 + t * (-1.453_152_1 + t * 1.061_405_4))));
    let y = 1.0 - poly * (-x * x).exp();
    if x < 0.0 { -y } else { y }
}

/// GELU as BERT uses it (with the exact error function), in place.
pub(crate) fn gelu(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Multi-head self-attention over `n` tokens: `qkv` holds each token's query, key and value
/// (`dim` floats each, heads side by side); returns each token's context (`n` × `dim`).
pub(crate) fn attention(qkv: &[f32], n: usize, dim: usize, heads: usize) -> Vec<f32> {
    let d = dim / heads;
    let scale = 1.0 / (d as f32).sqrt();
    let row = 3 * dim;
    let mut out = vec![0.0f32; n * dim];
    let mut scores = vec![0.0f32; n];
    for h in 0..heads {
        let (qo, ko, vo) = (h * d, dim + h * d, 2 * dim + h * d);
        for i in 0..n {
            let q = &qkv[i * row + qo..i * row + qo + d];
            let mut max = f32::NEG_INFINITY;
            for (j, s) in scores.iter_mut().enumerate() {
                *s = dot(q, &qkv[j * row + ko..j * row + ko + d]) * scale;
                max = max.max(*s);
            }
            let mut sum = 0.0;
            for s in &mut scores {
                *s = (*s - max).exp();
                sum += *s;
            }
            let ctx = &mut out[i * dim + h * d..i * dim + h * d + d];
            for (j, s) in scores.iter().enumerate() {
                let p = s / sum;
                for (c, v) in ctx.iter_mut().zip(&qkv[j * row + vo..j * row + vo + d]) {
                    *c += p * v;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Linear, attention, dot, erf, gelu, layer_norm};

    #[test]
    fn dot_covers_the_remainder_after_full_lanes() {
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        let b = vec![2.0f32; 37];
        assert_eq!(dot(&a, &b), 2.0 * (0..37).sum::<i32>() as f32);
    }

    #[test]
    fn linear_multiplies_by_the_transposed_weight_and_adds_the_bias() {
        // weight rows: [1 2 3], [0 -1 0]; x rows: [1 1 1], [2 0 1]
        let l = Linear::new(&[1.0, 2.0, 3.0, 0.0, -1.0, 0.0], vec![10.0, 0.5], 3, 2);
        let y = l.apply(&[1.0, 1.0, 1.0, 2.0, 0.0, 1.0], 2);
        assert_eq!(y, [16.0, -0.5, 15.0, 0.5]);
    }

    #[test]
    fn linear_matches_plain_dot_products_across_panels_and_short_row_blocks() {
        // 7 rows (a short last block of 3), 37 outputs (a partial third panel), 5 inputs.
        let (rows, inputs, outputs) = (7, 5, 37);
        let weight: Vec<f32> = (0..outputs * inputs)
            .map(|i| (i % 11) as f32 - 5.0)
            .collect();
        let bias: Vec<f32> = (0..outputs).map(|o| o as f32 * 0.25).collect();
        let x: Vec<f32> = (0..rows * inputs)
            .map(|i| (i % 7) as f32 * 0.5 - 1.0)
            .collect();
        let y = Linear::new(&weight, bias.clone(), inputs, outputs).apply(&x, rows);
        let mut want = Vec::new();
        for r in 0..rows {
            for o in 0..outputs {
                let w = &weight[o * inputs..][..inputs];
                want.push(dot(&x[r * inputs..][..inputs], w) + bias[o]);
            }
        }
        assert_eq!(y, want);
    }

    #[test]
    fn layer_norm_gives_mean_zero_and_unit_variance_before_the_affine_step() {
        let mut x = vec![1.0, 2.0, 3.0, 4.0];
        layer_norm(&mut x, &[1.0; 4], &[0.0; 4], 0.0);
        let mean: f32 = x.iter().sum::<f32>() / 4.0;
        let var: f32 = x.iter().map(|v| v * v).sum::<f32>() / 4.0;
        assert!(mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-5, "{x:?}");
    }

    #[test]
    fn erf_and_gelu_match_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 2e-7, "erf({x}) = {}", erf(x));
        }
        let mut v = vec![1.0f32, -1.0];
        gelu(&mut v);
        assert!((v[0] - 0.841_344_7).abs() < 1e-6 && (v[1] + 0.158_655_3).abs() < 1e-6);
    }

    #[test]
    fn attention_of_one_token_is_its_value() {
        // One token, two heads of width 1: q k v = [1 2] [3 4] [5 6].
        let ctx = attention(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 1, 2, 2);
        assert_eq!(ctx, [5.0, 6.0]);
    }

    #[test]
    fn attention_weighs_values_by_softmax_of_scaled_scores() {
        // Two tokens, one head of width 1: token 0 q=1 k=0 v=1; token 1 q=0 k=2 v=3.
        let qkv = [1.0, 0.0, 1.0, 0.0, 2.0, 3.0];
        let ctx = attention(&qkv, 2, 1, 1);
        let (e0, e1) = (0.0f32.exp(), 2.0f32.exp());
        let want0 = (e0 * 1.0 + e1 * 3.0) / (e0 + e1);
        assert!((ctx[0] - want0).abs() < 1e-6, "{ctx:?}");
        assert!((ctx[1] - 2.0).abs() < 1e-6, "equal scores average: {ctx:?}");
    }
}
