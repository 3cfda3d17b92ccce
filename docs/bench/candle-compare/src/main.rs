//! Query-embedding speed of ishiki-toolsearch's hand-written MiniLM forward pass against
//! candle's BERT (candle-transformers), on the CPU, with the same all-MiniLM-L6-v2 weights.
//!
//! Usage: `cargo run --release [-- MODEL_DIR]` (default: `.tools/all-minilm-l6-v2` of the
//! repository, as `cargo xtask tools` installs it).
//!
//! Both engines get the same token ids: candle is fed the ids of Ishiki's own
//! `Embedder::tokenize` (no `tokenizers` crate), so the vectors compare the forward passes.
//! Both pool by the mean over the attention mask and normalise to unit length.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use ishiki_toolsearch::semantic::Embedder;

/// Timed passes over the query set; each query is embedded by both engines in each pass.
const ROUNDS: usize = 3;

/// The paraphrased queries of the toolsearch test set, read as `benches/bench.rs` reads them.
fn queries() -> Vec<String> {
    serde_json::from_str::<Vec<serde_json::Value>>(include_str!(
        "../../../../crates/ishiki-toolsearch/tests/data/queries.json"
    ))
    .unwrap_or_default()
    .iter()
    .filter_map(|q| q["query"].as_str().map(str::to_owned))
    .collect()
}

/// candle's BERT and the device it runs on.
struct Candle {
    model: BertModel,
    device: Device,
}

impl Candle {
    /// Loads `config.json` and `model.safetensors` from `dir`. The weights file is read into
    /// memory (`from_buffered_safetensors`, safe code); candle's examples memory-map it instead
    /// with `unsafe { VarBuilder::from_mmaped_safetensors(..) }`, timed separately in `main`.
    fn load(dir: &Path) -> Result<Self, Box<dyn Error>> {
        let device = Device::Cpu;
        let config: Config =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?)?;
        let bytes = std::fs::read(dir.join("model.safetensors"))?;
        let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &device)?;
        Ok(Self {
            model: BertModel::load(vb, &config)?,
            device,
        })
    }

    /// The unit-length mean-pooled embedding of the token ids `ids` (one sequence, no padding).
    fn embed(&self, ids: &[u32]) -> Result<Vec<f32>, Box<dyn Error>> {
        let ids = Tensor::new(ids, &self.device)?.unsqueeze(0)?; // [1, n]
        let token_types = ids.zeros_like()?;
        let mask = ids.ones_like()?;
        let hidden = self.model.forward(&ids, &token_types, Some(&mask))?; // [1, n, 384]
                                                                           // Mean over the tokens the mask keeps (all of them here, as there is no padding).
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // [1, n, 1]
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // [1, 384]
        let mean = summed.broadcast_div(&mask.sum(1)?)?;
        // L2 normalisation.
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        Ok(mean.broadcast_div(&norm)?.squeeze(0)?.to_vec1::<f32>()?)
    }
}

/// The `p`-th percentile of sorted durations (nearest rank, as in `benches/bench.rs`).
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

/// Prints one engine's latency line.
fn report(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    println!(
        "{name:<8} p50 {}  p99 {}  mean {}  ({} embeddings)",
        ms(percentile(&times, 0.50)),
        ms(percentile(&times, 0.99)),
        ms(mean),
        times.len()
    );
}

fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::args().nth(1).map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../.tools/all-minilm-l6-v2"
            ))
        },
        PathBuf::from,
    );
    let queries = queries();
    if queries.is_empty() {
        return Err("no queries in queries.json".into());
    }
    println!("model: {}", dir.display());
    println!("queries: {}, rounds: {ROUNDS}", queries.len());
    println!(
        "candle threads: {} (RAYON_NUM_THREADS or all cores); Ishiki: 1 per query",
        candle_core::utils::get_num_threads()
    );

    // 1. Load both models, timing each (the file cache is warm after the first read).
    let start = Instant::now();
    let ishiki = Embedder::load(&dir)?;
    let ishiki_load = start.elapsed();
    let start = Instant::now();
    let candle = Candle::load(&dir)?;
    let candle_load = start.elapsed();
    // candle's usual loading path, for comparison: the weights memory-mapped, which candle-nn
    // marks `unsafe` (a file changed under the map is undefined behaviour).
    let start = Instant::now();
    let config: Config = serde_json::from_str(&std::fs::read_to_string(dir.join("config.json"))?)?;
    // SAFETY: nothing writes model.safetensors while this process runs.
    let vb = unsafe {
        VarBuilder::from_mmaped_safetensors(
            &[dir.join("model.safetensors")],
            DType::F32,
            &Device::Cpu,
        )?
    };
    let mmaped = BertModel::load(vb, &config)?;
    let candle_mmap_load = start.elapsed();
    drop(mmaped);

    // One untimed embedding each, so first-call allocations are not in the figures.
    let warm = &queries[0];
    ishiki.embed(warm)?;
    candle.embed(&ishiki.tokenize(warm))?;

    // 2. Embed each query with both engines, interleaved; who goes first alternates by round.
    // Both timings include Ishiki's tokenizer (candle is fed its ids), so they differ only in
    // the forward pass and pooling.
    let mut ishiki_times = Vec::with_capacity(ROUNDS * queries.len());
    let mut candle_times = Vec::with_capacity(ROUNDS * queries.len());
    let mut min_cosine = f32::INFINITY;
    let mut worst = String::new();
    let mut tokens = 0usize;
    for round in 0..ROUNDS {
        for query in &queries {
            let mut time_ishiki = || -> Result<Vec<f32>, Box<dyn Error>> {
                let start = Instant::now();
                let v = ishiki.embed(query)?;
                ishiki_times.push(start.elapsed());
                Ok(v)
            };
            let mut time_candle = || -> Result<Vec<f32>, Box<dyn Error>> {
                let start = Instant::now();
                let v = candle.embed(&ishiki.tokenize(query))?;
                candle_times.push(start.elapsed());
                Ok(v)
            };
            let (a, b) = if round % 2 == 0 {
                let a = time_ishiki()?;
                (a, time_candle()?)
            } else {
                let b = time_candle()?;
                (time_ishiki()?, b)
            };
            // 3. Agreement of the two engines' vectors.
            let c = cosine(&a, &b);
            if c < min_cosine {
                min_cosine = c;
                worst.clone_from(query);
            }
            if round == 0 {
                tokens += ishiki.tokenize(query).len();
            }
        }
    }

    // Beyond the brief's queries: one text at the MAX_TOKENS cap (128 ids; all queries run
    // together), as long tool descriptions are, 20 times per engine, interleaved.
    let long = queries.join(" ");
    let long_ids = ishiki.tokenize(&long);
    let (mut ishiki_long, mut candle_long) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let start = Instant::now();
        let a = ishiki.embed(&long)?;
        ishiki_long.push(start.elapsed());
        let start = Instant::now();
        let b = candle.embed(&ishiki.tokenize(&long))?;
        candle_long.push(start.elapsed());
        let c = cosine(&a, &b);
        if c < min_cosine {
            min_cosine = c;
            "(the long text)".clone_into(&mut worst);
        }
    }

    println!(
        "tokens per query: {:.1} on average ([CLS] and [SEP] included)",
        tokens as f64 / queries.len() as f64
    );
    report("ishiki", ishiki_times);
    report("candle", candle_times);
    println!("long text, {} tokens:", long_ids.len());
    report("ishiki", ishiki_long);
    report("candle", candle_long);
    println!("min cosine ishiki/candle: {min_cosine:.7} (query {worst:?})");
    // 4. Load times.
    println!("load ishiki: {}", ms(ishiki_load));
    println!("load candle (read into memory): {}", ms(candle_load));
    println!("load candle (unsafe mmap): {}", ms(candle_mmap_load));
    if min_cosine < 0.9999 {
        return Err(format!("the engines disagree: min cosine {min_cosine} < 0.9999").into());
    }
    Ok(())
}
