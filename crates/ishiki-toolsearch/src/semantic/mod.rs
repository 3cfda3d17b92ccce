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
mod speller;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use model::{Embedder, MAX_TOKENS};

use crate::def::{Hit, ToolDef};
use crate::error::{ToolsearchError, ToolsearchErrorKind};
use crate::index::ToolIndex;
use crate::text::split_identifier;
use speller::Speller;

/// How much the lexical score (divided by the best lexical score of the query) adds to the
/// cosine similarity in [`HybridIndex::search`].
pub const LEXICAL_SHARE: f32 = 0.3;
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

/// A 64-bit hash of `bytes` (rustc-hash's FxHasher): fast enough to fingerprint a 91 MB
/// weights file on every load, which is all it is for. A fingerprint that changes with a new
/// rustc-hash only makes the embedding cache compute its vectors again.
pub(crate) fn content_hash(seed: u64, bytes: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write_u64(seed);
    hasher.write(bytes);
    hasher.write_usize(bytes.len());
    hasher.finish()
}

/// Embeddings of tool texts, kept on disk between runs: a JSON object
/// `{"model": FINGERPRINT, "vectors": {TEXT: [f32…]}}`. The key is the text itself, so a tool
/// whose text changed is embedded again and one that did not never is; the fingerprint
/// identifies the weights, tokenizer and configuration (a hash of their bytes), so vectors of
/// another model are never reused. A missing, unreadable or damaged file is an empty cache:
/// it only holds what can be computed again.
#[derive(Debug, Clone, Default)]
pub struct EmbeddingCache {
    model: String,
    entries: HashMap<String, Vec<f32>>,
    /// Texts asked for since the cache was opened: what [`EmbeddingCache::save`] keeps.
    used: HashSet<String>,
    changed: bool,
    /// Texts embedded because the cache did not have them, since it was opened.
    embedded: usize,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CacheFile {
    model: String,
    vectors: HashMap<String, Vec<f32>>,
}

impl EmbeddingCache {
    /// The cache in `path`, or an empty one.
    pub fn open(path: &Path) -> Self {
        let file: Option<CacheFile> = std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        match file {
            Some(file) => Self {
                model: file.model,
                entries: file.vectors,
                ..Self::default()
            },
            None => Self::default(),
        }
    }

    /// Writes the cache to `path` if anything was added: the vectors of the texts asked for
    /// since it was opened (a tool that left the catalog leaves the file), through a temporary
    /// file renamed over the old one, so a crash never leaves half a cache.
    pub fn save(&self, path: &Path) -> Result<(), ToolsearchError> {
        if !self.changed {
            return Ok(());
        }
        let file = CacheFile {
            model: self.model.clone(),
            vectors: self
                .entries
                .iter()
                .filter(|(text, _)| self.used.contains(*text))
                .map(|(text, v)| (text.clone(), v.clone()))
                .collect(),
        };
        let text = serde_json::to_string(&file)
            .map_err(|e| model_error(format!("embedding cache: {e}")))?;
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        std::fs::write(&temporary, text)
            .and_then(|()| std::fs::rename(&temporary, path))
            .map_err(|e| model_error(format!("cannot write {}: {e}", path.display())))
    }

    /// How many texts the cache did not have and embedded (a forward pass each), since it
    /// was opened; texts another catalog of the process embedded with the same model are
    /// taken from the model's memory and not counted.
    pub fn embedded(&self) -> usize {
        self.embedded
    }

    /// The vectors of `texts`, in order: cached ones as they are, the rest embedded on every
    /// core (a text is independent of the others) and added to the cache.
    fn get_or_embed_all(&mut self, embedder: &Embedder, texts: &[String]) -> Vec<Vec<f32>> {
        if self.model != embedder.fingerprint {
            self.entries.clear();
            self.model = embedder.fingerprint.clone();
        }
        let dim = embedder.dim();
        self.used.extend(texts.iter().cloned());
        let mut missing: Vec<&String> = texts
            .iter()
            .filter(|t| self.entries.get(*t).is_none_or(|v| v.len() != dim))
            .collect();
        missing.sort();
        missing.dedup();
        // What another catalog of this process had embedded with the same model is not
        // embedded again.
        missing.retain(|text| match embedder.remembered(text) {
            Some(v) if v.len() == dim => {
                self.entries.insert((*text).clone(), v);
                self.changed = true;
                false
            }
            _ => true,
        });
        self.embedded += missing.len();
        let workers = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 8);
        let chunk = missing.len().div_ceil(workers).max(1);
        let embedded: Vec<Vec<Vec<f32>>> = std::thread::scope(|scope| {
            let jobs: Vec<_> = missing
                .chunks(chunk)
                .map(|part| {
                    let job =
                        scope.spawn(move || part.iter().map(|t| embedder.vector(t)).collect());
                    (part, job)
                })
                .collect();
            jobs.into_iter()
                // A thread that could not run its part (it panicked): this one does it.
                .map(|(part, job)| {
                    job.join()
                        .unwrap_or_else(|_| part.iter().map(|t| embedder.vector(t)).collect())
                })
                .collect()
        });
        for (part, vectors) in missing.chunks(chunk).zip(embedded) {
            for (text, v) in part.iter().zip(vectors) {
                embedder.remember(text, &v);
                self.entries.insert((*text).clone(), v);
                self.changed = true;
            }
        }
        texts
            .iter()
            .map(|t| match self.entries.get(t) {
                Some(v) => v.clone(),
                None => embedder.vector(t),
            })
            .collect()
    }
}

/// Ranks the tools of `lexical` for `query`: an exact name or `select:` as in
/// [`ToolIndex::search`]; otherwise every tool by the cosine similarity of its vector (row `i`
/// of `vectors` for the tool inserted `i`-th) to the query's plus `share` times its lexical
/// score relative to the query's best. The query is embedded with its misspelt words corrected
/// against the catalog's (`speller`: the model has never seen `termnal`) and its abbreviations
/// spelled out (`thesaurus::spell_out`: `pr` is `pull request` to it).
fn rank(
    lexical: &ToolIndex,
    embedder: &Embedder,
    speller: &Speller,
    vectors: &[f32],
    query: &str,
    k: usize,
    share: f32,
) -> Vec<Hit> {
    let hits = lexical.search(query, LEXICAL_DEPTH.max(k));
    let trimmed = query.trim();
    let exact = hits
        .first()
        .is_some_and(|h| h.name == trimmed || h.name.eq_ignore_ascii_case(trimmed));
    let select = trimmed
        .get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("select:"));
    if exact || select {
        let mut hits = hits;
        hits.truncate(if exact { k } else { hits.len() });
        return hits;
    }
    let dim = embedder.dim();
    let count = lexical.len().min(vectors.len() / dim.max(1));
    if k == 0 || count == 0 {
        return Vec::new();
    }
    let spelled = speller.correct(query, lexical, |w| embedder.knows_word(w));
    let q = embedder.vector(&crate::thesaurus::spell_out(&spelled));
    let mut scores: Vec<f32> = vectors
        .chunks_exact(dim)
        .take(count)
        .map(|v| v.iter().zip(&q).map(|(a, b)| a * b).sum())
        .collect();
    let best = hits.iter().map(|h| h.score).fold(0.0f64, f64::max);
    let mut hit_of: HashMap<usize, &Hit> = HashMap::new();
    if best > 0.0 {
        for hit in &hits {
            if let Some(i) = lexical.position_of(&hit.name).filter(|&i| i < count) {
                scores[i] += share * (hit.score / best) as f32;
                hit_of.insert(i, hit);
            }
        }
    }
    let mut order: Vec<usize> = (0..count).collect();
    let cmp = |a: &usize, b: &usize| {
        scores[*b]
            .total_cmp(&scores[*a])
            .then_with(|| lexical.name_at(*a).cmp(lexical.name_at(*b)))
    };
    if order.len() > k {
        order.select_nth_unstable_by(k - 1, cmp);
        order.truncate(k);
    }
    order.sort_unstable_by(cmp);
    order
        .into_iter()
        .map(|i| match hit_of.get(&i) {
            Some(hit) => Hit {
                score: f64::from(scores[i]),
                ..(*hit).clone()
            },
            None => lexical.hit_by_position(i, f64::from(scores[i])),
        })
        .collect()
}

/// Lexical BM25F and sentence embeddings over the same tools.
#[derive(Debug)]
pub struct HybridIndex {
    lexical: ToolIndex,
    embedder: Arc<Embedder>,
    /// Tool vectors, `dim` floats each, in tool order.
    vectors: Vec<f32>,
    /// The tools' words, to correct a query's before it is embedded.
    speller: Speller,
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
        let vectors = cache.get_or_embed_all(&embedder, &texts).concat();
        let mut speller = Speller::default();
        for text in &texts {
            speller.add_text(text);
        }
        Ok(Self {
            lexical: ToolIndex::build(defs),
            embedder,
            vectors,
            speller,
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
    /// score relative to the query's best, the query embedded with its misspelt words
    /// corrected against the tools' own.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, ToolsearchError> {
        Ok(rank(
            &self.lexical,
            &self.embedder,
            &self.speller,
            &self.vectors,
            query,
            k,
            self.lexical_share,
        ))
    }
}

/// The hybrid ranker as a [`Catalog`](crate::Catalog) uses it
/// ([`Catalog::set_semantic`](crate::Catalog::set_semantic)): the model, the vectors of the
/// catalog's searchable tools, and where they are cached between runs. Tools are embedded
/// when a search first needs them, and only those whose text is not cached; the cache file is
/// written after every search that embedded something.
#[derive(Debug, Clone)]
pub struct SemanticRanker {
    embedder: Arc<Embedder>,
    cache: EmbeddingCache,
    cache_file: Option<PathBuf>,
    /// Vectors of the catalog's index, in its order (`dim` floats per tool).
    vectors: Vec<f32>,
    /// The words of the tools with a vector.
    speller: Speller,
    /// The last error writing the cache file, if the last write failed.
    save_error: Option<String>,
}

impl SemanticRanker {
    /// A ranker whose vectors live in memory only.
    pub fn new(embedder: Arc<Embedder>) -> Self {
        Self {
            embedder,
            cache: EmbeddingCache::default(),
            cache_file: None,
            vectors: Vec::new(),
            speller: Speller::default(),
            save_error: None,
        }
    }

    /// A ranker whose vectors are kept in `path` ([`EmbeddingCache`]), read now: a restart
    /// with the same tools and model embeds nothing again.
    pub fn with_cache_file(embedder: Arc<Embedder>, path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Self {
            cache: EmbeddingCache::open(&path),
            cache_file: Some(path),
            ..Self::new(embedder)
        }
    }

    /// The model.
    pub fn embedder(&self) -> &Arc<Embedder> {
        &self.embedder
    }

    /// How many tool texts this ranker embedded because its cache did not have them.
    pub fn embedded(&self) -> usize {
        self.cache.embedded()
    }

    /// Why the cache file could not be written the last time, if it could not (the vectors
    /// are still used; the next start embeds them again).
    pub fn save_error(&self) -> Option<&str> {
        self.save_error.as_deref()
    }

    /// Tools with a vector, from the start of the index.
    pub(crate) fn rows(&self) -> usize {
        self.vectors.len() / self.embedder.dim().max(1)
    }

    /// Forgets the vectors (the index was rebuilt); the cache keeps them.
    pub(crate) fn reset(&mut self) {
        self.vectors.clear();
        self.speller = Speller::default();
    }

    /// Appends the vectors of `defs`, the index's next tools in order.
    pub(crate) fn extend(&mut self, defs: &[&ToolDef]) {
        let texts: Vec<String> = defs.iter().map(|d| tool_text(d)).collect();
        for text in &texts {
            self.speller.add_text(text);
        }
        for v in self.cache.get_or_embed_all(&self.embedder, &texts) {
            self.vectors.extend(v);
        }
        if let Some(path) = &self.cache_file {
            self.save_error = self.cache.save(path).err().map(|e| e.to_string());
            self.cache.changed &= self.save_error.is_some();
        }
    }

    /// Ranks `lexical`'s tools for `query` as [`HybridIndex::search`] does.
    pub(crate) fn search(&self, lexical: &ToolIndex, query: &str, k: usize) -> Vec<Hit> {
        rank(
            lexical,
            &self.embedder,
            &self.speller,
            &self.vectors,
            query,
            k,
            LEXICAL_SHARE,
        )
    }
}
