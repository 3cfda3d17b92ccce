//! The sentence-embedding model: all-MiniLM-L6-v2 (or another BERT of the same layout) loaded
//! from a sentence-transformers export, a WordPiece tokenizer over its vocabulary (no
//! `tokenizers` crate: BERT's uncased normaliser and pre-tokenizer, then longest-match-first
//! sub-words; checked id for id against the reference tokenizer on non-ASCII text too), and the
//! encoder's forward pass with mean pooling and unit length.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::math::{Linear, attention, gelu, layer_norm};
use super::safetensors::{self, Tensor};
use super::{content_hash, model_error};
use crate::error::ToolsearchError;

/// Tokens per text, `[CLS]` and `[SEP]` included (the model's own truncation).
pub const MAX_TOKENS: usize = 128;

/// The version of [`Embedder::tokenize`]'s rules, part of the model's fingerprint, so that
/// vectors cached under older rules are computed again (2: BERT's Unicode normaliser).
const TOKENIZER_VERSION: u32 = 2;

#[derive(Debug)]
struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

#[derive(Debug)]
struct Layer {
    /// Query, key and value weights stacked into one layer of three times the width.
    qkv: Linear,
    out: Linear,
    norm1: Norm,
    up: Linear,
    down: Linear,
    norm2: Norm,
}

/// A loaded sentence-embedding model: text in, unit-length vector out.
pub struct Embedder {
    vocab: HashMap<String, u32>,
    unk: u32,
    cls: u32,
    sep: u32,
    /// Word embeddings, `dim` floats per vocabulary entry.
    word: Vec<f32>,
    /// Position embeddings, `dim` floats per position.
    position: Vec<f32>,
    /// The embedding of token type 0 (every token of a single sentence).
    token_type: Vec<f32>,
    norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    eps: f32,
    dim: usize,
    /// Identifies the weights in embedding caches.
    pub(crate) fingerprint: String,
    /// The vectors of tool texts this model embedded in this process, so that every catalog
    /// sharing the model (the runtimes of one process: one per conversation) embeds a text
    /// once, not once per conversation. At most [`MAX_REMEMBERED`] texts of
    /// [`MAX_REMEMBERED_TEXT_BYTES`] together.
    remembered: std::sync::Mutex<Remembered>,
}

/// The vectors an [`Embedder`] remembers, and the bytes of their texts.
#[derive(Default)]
struct Remembered {
    vectors: HashMap<String, Vec<f32>>,
    text_bytes: usize,
}

/// The most tool texts an [`Embedder`] remembers the vectors of (1.5 KB each for MiniLM-L6:
/// about 15 MB), beyond which new ones are embedded as before but not kept, so a process fed
/// endless new tools does not grow without bound.
pub(crate) const MAX_REMEMBERED: usize = 10_000;
/// The most bytes of text the remembered vectors are keyed by (a server may describe its
/// tools at length): past it, as past [`MAX_REMEMBERED`], nothing more is kept.
pub(crate) const MAX_REMEMBERED_TEXT_BYTES: usize = 8 * 1024 * 1024;

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("layers", &self.layers.len())
            .field("dim", &self.dim)
            .field("vocab", &self.vocab.len())
            .finish_non_exhaustive()
    }
}

/// The JSON file `name` in `dir`, and a hash of its bytes for the fingerprint.
fn read_json(dir: &Path, name: &str) -> Result<(Value, u64), ToolsearchError> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| model_error(format!("cannot read {}: {e}", path.display())))?;
    let value = serde_json::from_str(&text)
        .map_err(|e| model_error(format!("{} is not valid json: {e}", path.display())))?;
    Ok((value, content_hash(0, text.as_bytes())))
}

/// Takes tensors out of a loaded weights file, checking each one's shape.
struct Weights(HashMap<String, Tensor>);

impl Weights {
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, ToolsearchError> {
        let t = self
            .0
            .remove(name)
            .or_else(|| self.0.remove(&format!("bert.{name}")))
            .ok_or_else(|| model_error(format!("model.safetensors has no f32 tensor {name}")))?;
        if t.shape != shape {
            return Err(model_error(format!(
                "model.safetensors: {name} has shape {:?}, expected {shape:?}",
                t.shape
            )));
        }
        Ok(t.data)
    }

    /// A dense layer's weight (`outputs` × `inputs`) and bias, as stored.
    fn dense(
        &mut self,
        name: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<(Vec<f32>, Vec<f32>), ToolsearchError> {
        Ok((
            self.take(&format!("{name}.weight"), &[outputs, inputs])?,
            self.take(&format!("{name}.bias"), &[outputs])?,
        ))
    }

    fn linear(
        &mut self,
        name: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<Linear, ToolsearchError> {
        let (weight, bias) = self.dense(name, inputs, outputs)?;
        Ok(Linear::new(&weight, bias, inputs, outputs))
    }

    fn norm(&mut self, name: &str, dim: usize) -> Result<Norm, ToolsearchError> {
        Ok(Norm {
            weight: self.take(&format!("{name}.weight"), &[dim])?,
            bias: self.take(&format!("{name}.bias"), &[dim])?,
        })
    }
}

impl Embedder {
    /// Loads the model from `dir` (a sentence-transformers export of all-MiniLM-L6-v2 or
    /// another BERT of the same layout).
    pub fn load(dir: &Path) -> Result<Self, ToolsearchError> {
        let (config, config_hash) = read_json(dir, "config.json")?;
        let get = |key: &str| {
            config[key]
                .as_u64()
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| model_error(format!("config.json has no number {key:?}")))
        };
        let (dim, heads, layers, inner, positions, types) = (
            get("hidden_size")?,
            get("num_attention_heads")?,
            get("num_hidden_layers")?,
            get("intermediate_size")?,
            get("max_position_embeddings")?,
            get("type_vocab_size")?,
        );
        if heads == 0 || dim % heads != 0 || layers > 64 || positions < MAX_TOKENS || types == 0 {
            return Err(model_error("config.json has an unusable shape"));
        }
        let eps = config["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32;
        let (tokenizer, tokenizer_hash) = read_json(dir, "tokenizer.json")?;
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
        let (tensors, weights_hash) = safetensors::load(&weights_path)?;
        let mut w = Weights(tensors);
        let words =
            w.0.get("embeddings.word_embeddings.weight")
                .or_else(|| w.0.get("bert.embeddings.word_embeddings.weight"))
                .and_then(|t| t.shape.first().copied())
                .unwrap_or(0);
        if vocab.values().any(|&id| id as usize >= words) {
            return Err(model_error(format!(
                "tokenizer.json has ids beyond the {words} word embeddings of model.safetensors"
            )));
        }
        let word = w.take("embeddings.word_embeddings.weight", &[words, dim])?;
        let position = w.take("embeddings.position_embeddings.weight", &[positions, dim])?;
        let mut token_type = w.take("embeddings.token_type_embeddings.weight", &[types, dim])?;
        token_type.truncate(dim);
        let norm = w.norm("embeddings.LayerNorm", dim)?;
        let mut stack = Vec::with_capacity(layers);
        for i in 0..layers {
            let p = format!("encoder.layer.{i}");
            let q = w.dense(&format!("{p}.attention.self.query"), dim, dim)?;
            let k = w.dense(&format!("{p}.attention.self.key"), dim, dim)?;
            let v = w.dense(&format!("{p}.attention.self.value"), dim, dim)?;
            let qkv = Linear::new(
                &[q.0, k.0, v.0].concat(),
                [q.1, k.1, v.1].concat(),
                dim,
                3 * dim,
            );
            stack.push(Layer {
                qkv,
                out: w.linear(&format!("{p}.attention.output.dense"), dim, dim)?,
                norm1: w.norm(&format!("{p}.attention.output.LayerNorm"), dim)?,
                up: w.linear(&format!("{p}.intermediate.dense"), dim, inner)?,
                down: w.linear(&format!("{p}.output.dense"), inner, dim)?,
                norm2: w.norm(&format!("{p}.output.LayerNorm"), dim)?,
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
            norm,
            layers: stack,
            heads,
            eps,
            dim,
            fingerprint: format!(
                "{:016x}-{MAX_TOKENS}-t{TOKENIZER_VERSION}",
                content_hash(
                    config_hash ^ tokenizer_hash.rotate_left(17),
                    &weights_hash.to_le_bytes()
                )
            ),
            remembered: std::sync::Mutex::default(),
        })
    }

    /// The vector of `text` if this model embedded it before, in this process.
    pub(crate) fn remembered(&self, text: &str) -> Option<Vec<f32>> {
        self.remembered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .vectors
            .get(text)
            .cloned()
    }

    /// Keeps the vector of `text` for the other catalogs of this process, unless
    /// [`MAX_REMEMBERED`] texts or [`MAX_REMEMBERED_TEXT_BYTES`] are kept already.
    pub(crate) fn remember(&self, text: &str, vector: &[f32]) {
        let mut remembered = self
            .remembered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let bytes = remembered.text_bytes.saturating_add(text.len());
        if remembered.vectors.len() < MAX_REMEMBERED
            && bytes <= MAX_REMEMBERED_TEXT_BYTES
            && !remembered.vectors.contains_key(text)
        {
            remembered.vectors.insert(text.to_owned(), vector.to_vec());
            remembered.text_bytes = bytes;
        }
    }

    /// Whether `word` (lower-cased) is a whole word of the model's vocabulary, not only
    /// sub-words.
    pub fn knows_word(&self, word: &str) -> bool {
        self.vocab.contains_key(&word.to_lowercase())
    }

    /// Dimensions of an embedding.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Token ids of `text`: `[CLS]`, WordPiece sub-words, `[SEP]`, at most [`MAX_TOKENS`].
    ///
    /// The text is normalised as BERT's uncased tokenizer does (`BertNormalizer` with
    /// `lowercase`, so accents are stripped, and `BertPreTokenizer`): control and format
    /// characters dropped, every whitespace a separator, lower-cased, decomposed (NFD) with its
    /// combining marks removed, each CJK ideograph a word of its own, and each punctuation
    /// character (ASCII punctuation or Unicode category P) a token of its own.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        use unicode_normalization::UnicodeNormalization as _;
        let mut ids = vec![self.cls];
        let mut word = String::new();
        let flush = |word: &mut String, ids: &mut Vec<u32>| {
            if !word.is_empty() {
                self.wordpiece(word, ids);
                word.clear();
            }
        };
        let lowered = text.chars().flat_map(char::to_lowercase);
        for c in lowered.nfd() {
            if ids.len() >= MAX_TOKENS - 1 {
                break;
            }
            match bert_class(c) {
                Class::Dropped => {}
                Class::Space => flush(&mut word, &mut ids),
                Class::Alone => {
                    flush(&mut word, &mut ids);
                    let mut alone = String::new();
                    alone.push(c);
                    ids.push(self.vocab.get(&alone).copied().unwrap_or(self.unk));
                }
                Class::Word => word.push(c),
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
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, ToolsearchError> {
        Ok(self.vector(text))
    }

    /// [`Embedder::embed`] for callers in this crate: a loaded model embeds any text.
    pub(crate) fn vector(&self, text: &str) -> Vec<f32> {
        self.forward(&self.tokenize(text))
    }

    /// Runs the encoder over `ids` and returns the mean of the last layer, at unit length.
    fn forward(&self, ids: &[u32]) -> Vec<f32> {
        let (n, dim) = (ids.len(), self.dim);
        let mut x = Vec::with_capacity(n * dim);
        for (pos, &id) in ids.iter().enumerate() {
            let word = &self.word[id as usize * dim..][..dim];
            let position = &self.position[pos * dim..][..dim];
            x.extend(
                word.iter()
                    .zip(position)
                    .zip(&self.token_type)
                    .map(|((w, p), t)| w + p + t),
            );
        }
        layer_norm(&mut x, &self.norm.weight, &self.norm.bias, self.eps);
        for layer in &self.layers {
            let qkv = layer.qkv.apply(&x, n);
            let context = attention(&qkv, n, dim, self.heads);
            let attended = layer.out.apply(&context, n);
            for (a, b) in x.iter_mut().zip(&attended) {
                *a += b;
            }
            layer_norm(&mut x, &layer.norm1.weight, &layer.norm1.bias, self.eps);
            let mut inner = layer.up.apply(&x, n);
            gelu(&mut inner);
            let fed = layer.down.apply(&inner, n);
            for (a, b) in x.iter_mut().zip(&fed) {
                *a += b;
            }
            layer_norm(&mut x, &layer.norm2.weight, &layer.norm2.bias, self.eps);
        }
        let mut pooled = vec![0.0f32; dim];
        for row in x.chunks_exact(dim) {
            for (p, v) in pooled.iter_mut().zip(row) {
                *p += v;
            }
        }
        let norm = pooled.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
        for p in &mut pooled {
            *p /= norm;
        }
        pooled
    }
}

/// How BERT's uncased normaliser and pre-tokenizer treat one character of the lower-cased,
/// decomposed text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Removed: NUL, U+FFFD, control and format characters, and combining marks (the accents
    /// NFD split off).
    Dropped,
    /// Separates words.
    Space,
    /// A token of its own: punctuation, or a CJK ideograph.
    Alone,
    /// Part of a word.
    Word,
}

fn bert_class(c: char) -> Class {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if matches!(c, ' ' | '\t' | '\n' | '\r') {
        return Class::Space;
    }
    let category = get_general_category(c);
    match category {
        G::SpaceSeparator | G::LineSeparator | G::ParagraphSeparator => Class::Space,
        G::NonspacingMark => Class::Dropped,
        G::Control | G::Format | G::PrivateUse | G::Surrogate | G::Unassigned => Class::Dropped,
        // NUL is a control character already; U+FFFD is a symbol BERT drops all the same.
        _ if c == '\u{fffd}' => Class::Dropped,
        G::ConnectorPunctuation
        | G::DashPunctuation
        | G::OpenPunctuation
        | G::ClosePunctuation
        | G::InitialPunctuation
        | G::FinalPunctuation
        | G::OtherPunctuation => Class::Alone,
        _ if c.is_ascii_punctuation() || is_cjk_ideograph(c) => Class::Alone,
        _ => Class::Word,
    }
}

/// The CJK ideograph blocks BERT splits character by character (its `_is_chinese_char`).
fn is_cjk_ideograph(c: char) -> bool {
    matches!(u32::from(c),
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}
