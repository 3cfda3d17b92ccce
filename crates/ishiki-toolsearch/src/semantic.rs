//! The semantic reranker (feature `semantic`): a small sentence-embedding model
//! (all-MiniLM-L6-v2: BERT, 6 layers, 384 dimensions) run on the CPU with `candle-core`, its
//! weights read from a directory the user gives (`config.json`, `tokenizer.json`,
//! `model.safetensors`, as the model is published).
//!
//! [`HybridIndex`] embeds every tool once (name words and description; vectors are kept with the
//! index and can be cached in a file keyed by the text embedded), embeds each query, and ranks
//! all tools by cosine similarity plus a share of the lexical BM25F score, so a typed name, a
//! rare word or a corrected typo still counts while words the tool never uses can match by
//! meaning. The tokenizer is a plain WordPiece over the model's vocabulary (no `tokenizers`
//! crate): lower-cased, split on whitespace and punctuation, longest-match-first sub-words.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle_core::{D, DType, Device, Tensor};
use serde_json::Value;

use crate::def::{Hit, ToolDef};
use crate::error::{Error, ErrorKind};
use crate::index::ToolIndex;
use crate::text::split_identifier;

/// Tokens per text, `[CLS]` and `[SEP]` included (the model's own truncation).
pub const MAX_TOKENS: usize = 128;
/// How much the lexical score (divided by the best lexical score of the query) adds to the
/// cosine similarity in [`HybridIndex::search`].
pub const LEXICAL_SHARE: f32 = 0.3;
/// How many lexical hits take part in the fusion.
const LEXICAL_DEPTH: usize = 50;

fn model_error(what: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Model, what.to_string())
}

struct Layer {
    qkv: Tensor,
    qkv_bias: Tensor,
    out: Tensor,
    out_bias: Tensor,
    ln1: (Tensor, Tensor),
    up: Tensor,
    up_bias: Tensor,
    down: Tensor,
    down_bias: Tensor,
    ln2: (Tensor, Tensor),
}

/// A loaded sentence-embedding model: text in, unit-length vector out.
pub struct Embedder {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    ln: (Tensor, Tensor),
    layers: Vec<Layer>,
    heads: usize,
    eps: f64,
    dim: usize,
    /// Identifies the weights in embedding caches.
    fingerprint: String,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("layers", &self.layers.len())
            .field("dim", &self.dim)
            .field("vocab", &self.vocab.len())
            .finish_non_exhaustive()
    }
}

fn read_json(dir: &Path, name: &str) -> Result<Value, Error> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| model_error(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| model_error(format!("{} is not valid json: {e}", path.display())))
}

impl Embedder {
    /// Loads the model from `dir` (a sentence-transformers export of all-MiniLM-L6-v2 or
    /// another BERT of the same layout).
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let config = read_json(dir, "config.json")?;
        let get = |key: &str| {
            config[key]
                .as_u64()
                .map(|v| v as usize)
                .ok_or_else(|| model_error(format!("config.json has no number {key:?}")))
        };
        let (hidden, heads, layers) = (
            get("hidden_size")?,
            get("num_attention_heads")?,
            get("num_hidden_layers")?,
        );
        if heads == 0 || hidden % heads != 0 || layers > 64 {
            return Err(model_error("config.json has an unusable shape"));
        }
        let eps = config["layer_norm_eps"].as_f64().unwrap_or(1e-12);
        let tokenizer = read_json(dir, "tokenizer.json")?;
        let vocab: HashMap<String, u32> = tokenizer["model"]["vocab"]
            .as_object()
            .ok_or_else(|| model_error("tokenizer.json has no model.vocab"))?
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), u32::try_from(v.as_u64()?).ok()?)))
            .collect();
        let special = |t: &str| {
            vocab
                .get(t)
                .copied()
                .ok_or_else(|| model_error(format!("tokenizer.json has no {t} token")))
        };
        let (unk, cls, sep) = (special("[UNK]")?, special("[CLS]")?, special("[SEP]")?);
        let weights_path = dir.join("model.safetensors");
        let meta = std::fs::metadata(&weights_path)
            .map_err(|e| model_error(format!("cannot read {}: {e}", weights_path.display())))?;
        let mut tensors = candle_core::safetensors::load(&weights_path, &Device::Cpu)
            .map_err(|e| model_error(format!("{}: {e}", weights_path.display())))?;
        let mut take = |name: &str| -> Result<Tensor, Error> {
            let t = tensors
                .remove(name)
                .or_else(|| tensors.remove(&format!("bert.{name}")))
                .ok_or_else(|| model_error(format!("model.safetensors has no {name}")))?;
            t.to_dtype(DType::F32).map_err(model_error)
        };
        // Linear weights are stored (out, in); keep them (in, out) so `x.matmul(w)` needs no
        // transpose per call.
        let linear = |t: Tensor| t.t().and_then(|t| t.contiguous()).map_err(model_error);
        let word = take("embeddings.word_embeddings.weight")?;
        let position = take("embeddings.position_embeddings.weight")?;
        let token_type = take("embeddings.token_type_embeddings.weight")?
            .get(0)
            .map_err(model_error)?;
        let ln = (
            take("embeddings.LayerNorm.weight")?,
            take("embeddings.LayerNorm.bias")?,
        );
        let mut stack = Vec::with_capacity(layers);
        for i in 0..layers {
            let p = format!("encoder.layer.{i}");
            let q = take(&format!("{p}.attention.self.query.weight"))?;
            let k = take(&format!("{p}.attention.self.key.weight"))?;
            let v = take(&format!("{p}.attention.self.value.weight"))?;
            let qkv = linear(Tensor::cat(&[&q, &k, &v], 0).map_err(model_error)?)?;
            let qb = take(&format!("{p}.attention.self.query.bias"))?;
            let kb = take(&format!("{p}.attention.self.key.bias"))?;
            let vb = take(&format!("{p}.attention.self.value.bias"))?;
            let qkv_bias = Tensor::cat(&[&qb, &kb, &vb], 0).map_err(model_error)?;
            stack.push(Layer {
                qkv,
                qkv_bias,
                out: linear(take(&format!("{p}.attention.output.dense.weight"))?)?,
                out_bias: take(&format!("{p}.attention.output.dense.bias"))?,
                ln1: (
                    take(&format!("{p}.attention.output.LayerNorm.weight"))?,
                    take(&format!("{p}.attention.output.LayerNorm.bias"))?,
                ),
                up: linear(take(&format!("{p}.intermediate.dense.weight"))?)?,
                up_bias: take(&format!("{p}.intermediate.dense.bias"))?,
                down: linear(take(&format!("{p}.output.dense.weight"))?)?,
                down_bias: take(&format!("{p}.output.dense.bias"))?,
                ln2: (
                    take(&format!("{p}.output.LayerNorm.weight"))?,
                    take(&format!("{p}.output.LayerNorm.bias"))?,
                ),
            });
        }
        Ok(Self {
            vocab,
            unk,
            cls,
            sep,
            word,
            position,
            token_type,
            ln,
            layers: stack,
            heads,
            eps,
            dim: hidden,
            fingerprint: format!("{}-{hidden}-{layers}", meta.len()),
        })
    }

    /// Dimensions of an embedding.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Token ids of `text`: `[CLS]`, WordPiece sub-words, `[SEP]`, at most [`MAX_TOKENS`].
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.cls];
        let mut word = String::new();
        let flush = |word: &mut String, ids: &mut Vec<u32>| {
            if !word.is_empty() {
                self.wordpiece(word, ids);
                word.clear();
            }
        };
        for c in text.chars() {
            if ids.len() >= MAX_TOKENS - 1 {
                break;
            }
            if c.is_whitespace() || c.is_control() {
                flush(&mut word, &mut ids);
            } else if c.is_ascii_punctuation() || !(c.is_alphanumeric() || c.is_whitespace()) {
                flush(&mut word, &mut ids);
                let mut p = String::new();
                p.extend(c.to_lowercase());
                ids.push(self.vocab.get(&p).copied().unwrap_or(self.unk));
            } else {
                word.extend(c.to_lowercase());
            }
        }
        flush(&mut word, &mut ids);
        ids.truncate(MAX_TOKENS - 1);
        ids.push(self.sep);
        ids
    }

    fn wordpiece(&self, word: &str, ids: &mut Vec<u32>) {
        if word.chars().count() > 100 {
            ids.push(self.unk);
            return;
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut candidate = String::new();
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while end > start {
                if !word.is_char_boundary(end) {
                    end -= 1;
                    continue;
                }
                candidate.clear();
                if start > 0 {
                    candidate.push_str("##");
                }
                candidate.push_str(&word[start..end]);
                if let Some(&id) = self.vocab.get(&candidate) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    pieces.push(id);
                    start = end;
                }
                None => {
                    ids.push(self.unk);
                    return;
                }
            }
        }
        ids.extend(pieces);
    }

    /// The unit-length embedding of `text` (mean of the last layer over its tokens).
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, Error> {
        let ids = self.tokenize(text);
        self.forward(&ids).map_err(model_error)
    }

    fn layer_norm(x: &Tensor, (w, b): &(Tensor, Tensor), eps: f64) -> candle_core::Result<Tensor> {
        let mean = x.mean_keepdim(D::Minus1)?;
        let centered = x.broadcast_sub(&mean)?;
        let var = centered.sqr()?.mean_keepdim(D::Minus1)?;
        centered
            .broadcast_div(&(var + eps)?.sqrt()?)?
            .broadcast_mul(w)?
            .broadcast_add(b)
    }

    fn forward(&self, ids: &[u32]) -> candle_core::Result<Vec<f32>> {
        let n = ids.len();
        let dev = Device::Cpu;
        let ids_t = Tensor::new(ids, &dev)?;
        let x = self
            .word
            .index_select(&ids_t, 0)?
            .add(&self.position.narrow(0, 0, n)?)?
            .broadcast_add(&self.token_type)?;
        let mut x = Self::layer_norm(&x, &self.ln, self.eps)?;
        let (h, d) = (self.heads, self.dim / self.heads);
        let scale = 1.0 / (d as f64).sqrt();
        for layer in &self.layers {
            let qkv = x.matmul(&layer.qkv)?.broadcast_add(&layer.qkv_bias)?;
            let split = |i: usize| -> candle_core::Result<Tensor> {
                qkv.narrow(1, i * self.dim, self.dim)?
                    .reshape((n, h, d))?
                    .transpose(0, 1)?
                    .contiguous()
            };
            let (q, k, v) = (split(0)?, split(1)?, split(2)?);
            let scores = (q.matmul(&k.t()?.contiguous()?)? * scale)?;
            let max = scores.max_keepdim(D::Minus1)?;
            let e = scores.broadcast_sub(&max)?.exp()?;
            let probs = e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?;
            let ctx = probs
                .matmul(&v)?
                .transpose(0, 1)?
                .contiguous()?
                .reshape((n, self.dim))?;
            let attn = ctx.matmul(&layer.out)?.broadcast_add(&layer.out_bias)?;
            x = Self::layer_norm(&(x + attn)?, &layer.ln1, self.eps)?;
            let ff = x
                .matmul(&layer.up)?
                .broadcast_add(&layer.up_bias)?
                .gelu_erf()?
                .matmul(&layer.down)?
                .broadcast_add(&layer.down_bias)?;
            x = Self::layer_norm(&(x + ff)?, &layer.ln2, self.eps)?;
        }
        let pooled = x.mean(0)?;
        let mut v = pooled.to_vec1::<f32>()?;
        let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
        for a in &mut v {
            *a /= norm;
        }
        Ok(v)
    }
}

/// What a tool is embedded as: the words of its name and its description.
pub fn tool_text(def: &ToolDef) -> String {
    let mut words = Vec::new();
    split_identifier(&def.name, |w| words.push(w.to_lowercase()));
    let mut text = words.join(" ");
    text.push_str(": ");
    text.push_str(def.description.trim());
    text
}

fn fnv(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Embeddings of tool texts kept on disk between runs: one JSON object from the hash of the
/// model and text to the vector. A missing or unreadable file is an empty cache.
#[derive(Debug, Default)]
pub struct EmbeddingCache {
    entries: HashMap<String, Vec<f32>>,
    changed: bool,
}

impl EmbeddingCache {
    /// The cache in `path`, or an empty one.
    pub fn open(path: &Path) -> Self {
        let entries = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        Self {
            entries,
            changed: false,
        }
    }

    /// Writes the cache to `path` if anything was added.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        if !self.changed {
            return Ok(());
        }
        let text = serde_json::to_string(&self.entries)
            .map_err(|e| model_error(format!("embedding cache: {e}")))?;
        std::fs::write(path, text)
            .map_err(|e| model_error(format!("cannot write {}: {e}", path.display())))
    }

    fn get_or_embed(&mut self, embedder: &Embedder, text: &str) -> Result<Vec<f32>, Error> {
        let key = format!("{:016x}-{}", fnv(text), embedder.fingerprint);
        if let Some(v) = self.entries.get(&key)
            && v.len() == embedder.dim
        {
            return Ok(v.clone());
        }
        let v = embedder.embed(text)?;
        self.entries.insert(key, v.clone());
        self.changed = true;
        Ok(v)
    }
}

/// Lexical BM25F and sentence embeddings over the same tools.
#[derive(Debug)]
pub struct HybridIndex {
    lexical: ToolIndex,
    embedder: Arc<Embedder>,
    names: Vec<String>,
    /// Tool vectors, `dim` floats each, in tool order.
    vectors: Vec<f32>,
    by_name: HashMap<String, usize>,
    lexical_share: f32,
}

impl HybridIndex {
    /// Builds the lexical index and embeds every tool (from `cache` when it has the text).
    pub fn build(
        defs: &[ToolDef],
        embedder: Arc<Embedder>,
        cache: &mut EmbeddingCache,
    ) -> Result<Self, Error> {
        let mut vectors = Vec::with_capacity(defs.len() * embedder.dim);
        for def in defs {
            vectors.extend(cache.get_or_embed(&embedder, &tool_text(def))?);
        }
        Ok(Self {
            lexical: ToolIndex::build(defs),
            names: defs.iter().map(|d| d.name.clone()).collect(),
            by_name: defs
                .iter()
                .enumerate()
                .map(|(i, d)| (d.name.clone(), i))
                .collect(),
            embedder,
            vectors,
            lexical_share: LEXICAL_SHARE,
        })
    }

    /// Sets how much the relative lexical score adds to the cosine (default
    /// [`LEXICAL_SHARE`]).
    pub fn set_lexical_share(&mut self, share: f32) {
        self.lexical_share = share;
    }

    /// The lexical index alone.
    pub fn lexical(&self) -> &ToolIndex {
        &self.lexical
    }

    /// At most `k` hits: an exact name or `select:` as in [`ToolIndex::search`]; otherwise
    /// every tool by cosine similarity to the query plus the lexical share times its lexical
    /// score relative to the query's best.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, Error> {
        let lexical = self.lexical.search(query, LEXICAL_DEPTH.max(k));
        let trimmed = query.trim();
        let exact = lexical
            .first()
            .is_some_and(|h| h.name == trimmed || h.name.eq_ignore_ascii_case(trimmed));
        if exact || trimmed.len() >= 7 && trimmed[..7].eq_ignore_ascii_case("select:") {
            let mut hits = lexical;
            hits.truncate(if exact { k } else { hits.len() });
            return Ok(hits);
        }
        if k == 0 || self.names.is_empty() {
            return Ok(Vec::new());
        }
        let q = self.embedder.embed(query)?;
        let dim = self.embedder.dim;
        let mut scores: Vec<f32> = self
            .vectors
            .chunks_exact(dim)
            .map(|v| v.iter().zip(&q).map(|(a, b)| a * b).sum())
            .collect();
        let best = lexical.iter().map(|h| h.score).fold(0.0f64, f64::max);
        let mut hit_of: HashMap<usize, &Hit> = HashMap::new();
        if best > 0.0 {
            for hit in &lexical {
                if let Some(&i) = self.by_name.get(&hit.name) {
                    scores[i] += self.lexical_share * (hit.score / best) as f32;
                    hit_of.insert(i, hit);
                }
            }
        }
        let mut order: Vec<usize> = (0..self.names.len()).collect();
        let cmp = |a: &usize, b: &usize| {
            scores[*b]
                .total_cmp(&scores[*a])
                .then_with(|| self.names[*a].cmp(&self.names[*b]))
        };
        if order.len() > k {
            order.select_nth_unstable_by(k - 1, cmp);
            order.truncate(k);
        }
        order.sort_unstable_by(cmp);
        Ok(order
            .into_iter()
            .map(|i| match hit_of.get(&i) {
                Some(hit) => Hit {
                    score: f64::from(scores[i]),
                    ..(*hit).clone()
                },
                None => self.lexical.hit_by_position(i, f64::from(scores[i])),
            })
            .collect())
    }
}
