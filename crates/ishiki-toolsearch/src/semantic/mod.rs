//! The semantic reranker (feature `semantic`): a small sentence-embedding model
//! (all-MiniLM-L6-v2: BERT, 6 layers, 384 dimensions) run on the CPU in plain Rust
//! ([`model`] for the forward pass and tokenizer, `math` for the arithmetic, `safetensors` for
//! the weights file), its weights read from a directory the user gives (`config.json`,
//! `tokenizer.json`, `model.safetensors`, as the model is published).
//!
//! [`HybridIndex`] embeds every tool once (name words and description; vectors are kept with the
//! index and can be cached in a file keyed by the text embedded), embeds each query, and ranks
//! all tools by cosine similarity plus a share of the lexical BM25F score, so a typed name, a
//! rare word or a corrected typo still counts while words the tool never uses can match by
//! meaning.

mod math;
pub mod model;
mod safetensors;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

pub use model::{Embedder, MAX_TOKENS};

use crate::def::{Hit, ToolDef};
use crate::error::{ToolsearchError, ToolsearchErrorKind};
use crate::index::ToolIndex;
use crate::text::split_identifier;

/// How much the lexical score (divided by the best lexical score of the query) adds to the
/// cosine similarity in [`HybridIndex::search`].
pub const LEXICAL_SHARE: f32 = 0.3;
/// The lexical share when a query word is a typo the lexical ranker corrects (1.0 chosen on
/// `tune`: typo hit@1 0.595 → 0.784; 0.6 and 2.0 no better overall).
pub const TYPO_LEXICAL_SHARE: f32 = 1.0;
/// How many lexical hits take part in the fusion (20 worse on `tune`; 100 and all the same).
const LEXICAL_DEPTH: usize = 50;

fn model_error(what: impl std::fmt::Display) -> ToolsearchError {
    ToolsearchError::new(ToolsearchErrorKind::Model, what.to_string())
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
    pub fn save(&self, path: &Path) -> Result<(), ToolsearchError> {
        if !self.changed {
            return Ok(());
        }
        let text = serde_json::to_string(&self.entries)
            .map_err(|e| model_error(format!("embedding cache: {e}")))?;
        std::fs::write(path, text)
            .map_err(|e| model_error(format!("cannot write {}: {e}", path.display())))
    }

    fn key(embedder: &Embedder, text: &str) -> String {
        format!("{:016x}-{}", fnv(text), embedder.fingerprint)
    }

    /// The vectors of `texts`, in order: cached ones as they are, the rest embedded on every
    /// core (a text is independent of the others) and added to the cache.
    fn get_or_embed_all(
        &mut self,
        embedder: &Embedder,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, ToolsearchError> {
        let dim = embedder.dim();
        let mut missing: Vec<&String> = texts
            .iter()
            .filter(|t| {
                self.entries
                    .get(&Self::key(embedder, t))
                    .is_none_or(|v| v.len() != dim)
            })
            .collect();
        missing.sort();
        missing.dedup();
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 8);
        let chunk = missing.len().div_ceil(workers).max(1);
        let embedded: Vec<Result<Vec<Vec<f32>>, ToolsearchError>> = std::thread::scope(|scope| {
            let jobs: Vec<_> = missing
                .chunks(chunk)
                .map(|part| scope.spawn(move || part.iter().map(|t| embedder.embed(t)).collect()))
                .collect();
            jobs.into_iter()
                .map(|job| {
                    job.join()
                        .unwrap_or_else(|_| Err(model_error("an embedding thread panicked")))
                })
                .collect()
        });
        let mut vectors = embedded.into_iter();
        for part in missing.chunks(chunk) {
            let part_vectors = vectors
                .next()
                .unwrap_or_else(|| Err(model_error("an embedding thread returned nothing")))?;
            for (text, v) in part.iter().zip(part_vectors) {
                self.entries.insert(Self::key(embedder, text), v);
                self.changed = true;
            }
        }
        texts
            .iter()
            .map(|t| {
                self.entries
                    .get(&Self::key(embedder, t))
                    .cloned()
                    .ok_or_else(|| model_error("a tool text has no embedding"))
            })
            .collect()
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
    ) -> Result<Self, ToolsearchError> {
        let texts: Vec<String> = defs.iter().map(tool_text).collect();
        let vectors = cache.get_or_embed_all(&embedder, &texts)?.concat();
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

    /// Whether `query` has a word the model does not know whole and the lexical ranker
    /// corrects to one of its words.
    fn has_typo(&self, query: &str) -> bool {
        query
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| w.chars().count() >= 4 && !self.embedder.knows_word(w))
            && self.lexical.corrects_typos(query)
    }

    /// The lexical index alone.
    pub fn lexical(&self) -> &ToolIndex {
        &self.lexical
    }

    /// At most `k` hits: an exact name or `select:` as in [`ToolIndex::search`]; otherwise
    /// every tool by cosine similarity to the query plus the lexical share times its lexical
    /// score relative to the query's best (a larger share, [`TYPO_LEXICAL_SHARE`], when the
    /// query has a typo the lexical ranker corrects).
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, ToolsearchError> {
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
        let dim = self.embedder.dim();
        let mut scores: Vec<f32> = self
            .vectors
            .chunks_exact(dim)
            .map(|v| v.iter().zip(&q).map(|(a, b)| a * b).sum())
            .collect();
        let best = lexical.iter().map(|h| h.score).fold(0.0f64, f64::max);
        // The model has never seen a misspelt word; the lexical ranker corrects it, so it
        // weighs more then. Both must agree: a word the lexical vocabulary lacks but the
        // model knows whole (`links` in a catalog that only says `link`) is no typo.
        let share = if self.has_typo(query) {
            self.lexical_share.max(TYPO_LEXICAL_SHARE)
        } else {
            self.lexical_share
        };
        let mut hit_of: HashMap<usize, &Hit> = HashMap::new();
        if best > 0.0 {
            for hit in &lexical {
                if let Some(&i) = self.by_name.get(&hit.name) {
                    scores[i] += share * (hit.score / best) as f32;
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
