//! The BM25F index over tool definitions (TS-6).
//!
//! Every tool is one document with four fields: its name, its description (and origin), its
//! parameter names and its parameter descriptions (with enum values). Postings hold the
//! per-field term counts; scores are computed at query time from the running field-length
//! sums, so tools can be appended to a built index without re-scoring the others.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde_json::Value;

use crate::def::{Hit, ToolDef, short_description};
use crate::text::{Kind, QueryGroup, query_groups, terms};

const FIELDS: usize = 4;
const NAME: usize = 0;
const DESCRIPTION: usize = 1;
const PARAM_NAME: usize = 2;
const PARAM_DESCRIPTION: usize = 3;

/// Field weights: a word in the name says most about a tool; parameter names come next (what
/// a tool takes is what it is about); long parameter descriptions say least.
const WEIGHTS: [f64; FIELDS] = [3.0, 1.0, 1.5, 0.5];
/// Length normalization per field (BM25 `b`): names are short and similar in length, so their
/// length matters less.
const B: [f64; FIELDS] = [0.5, 0.75, 0.5, 0.75];
const K1: f64 = 1.2;

/// How deep parameter walking goes below the top-level properties.
const PARAM_LEVELS: usize = 2;
/// A bound on schema nodes visited per tool, so a pathological schema cannot stall indexing.
const PARAM_NODE_BUDGET: usize = 400;

/// A multiply-rotate hash (the one rustc uses) for the term dictionary: several times faster
/// than SipHash on short words, which dominates indexing. Flooding protection buys nothing
/// here: the keys are words of tool definitions the host chose to load.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(SEED);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(SEED);
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FastHash = BuildHasherDefault<FxHasher>;

/// The default number of hits a search returns.
pub const DEFAULT_K: usize = 5;

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: [u16; FIELDS],
}

#[derive(Debug, Clone)]
struct Doc {
    name: String,
    short: String,
    len: [u32; FIELDS],
}

/// A BM25F index over tool definitions: build it once, append to it, search it.
///
/// Ranking: an exact name (the whole query, or each name after `select:`) comes first; then
/// documents by descending score, ties broken by name so results are deterministic.
#[derive(Debug, Clone, Default)]
pub struct ToolIndex {
    terms: HashMap<String, u32, FastHash>,
    /// Term text by id.
    term_names: Vec<Box<str>>,
    postings: Vec<Vec<Posting>>,
    docs: Vec<Doc>,
    len_sum: [u64; FIELDS],
    by_name: HashMap<String, u32, FastHash>,
    by_lower_name: HashMap<String, u32, FastHash>,
    /// Typo tolerance: every plain word of the vocabulary (letters only, at least
    /// [`TYPO_MIN_LEN`] long) under each of its one-letter deletions, so a query word one
    /// edit away finds it (symmetric deletion).
    deletions: HashMap<Box<str>, Vec<u32>, FastHash>,
    /// Reused while indexing one tool: (term, field) of every word.
    scratch: Vec<(u32, usize)>,
}

impl ToolIndex {
    /// An index over `defs`, in order.
    pub fn build(defs: &[ToolDef]) -> Self {
        let mut index = Self::default();
        for def in defs {
            index.insert(def);
        }
        index
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Appends one tool. A second tool with an existing name is indexed too, and the exact-name
    /// lookup then finds the newer one; callers that replace tools rebuild instead.
    pub fn insert(&mut self, def: &ToolDef) {
        let doc = self.docs.len() as u32;
        let mut found = std::mem::take(&mut self.scratch);
        found.clear();
        {
            let mut add = |field: usize, term: &str| {
                let id = match self.terms.get(term) {
                    Some(&id) => id,
                    None => {
                        let id = self.postings.len() as u32;
                        self.terms.insert(term.to_owned(), id);
                        self.postings.push(Vec::new());
                        self.term_names.push(term.into());
                        if typo_candidate(term) {
                            for_each_deletion(term, |d| {
                                self.deletions.entry(d.into()).or_default().push(id);
                            });
                        }
                        id
                    }
                };
                found.push((id, field));
            };
            for_each_text(def, |field, text| match field {
                TextField::Name => terms(text, Kind::Identifier, true, |t| add(NAME, t)),
                TextField::Description | TextField::Origin => {
                    terms(text, Kind::Prose, false, |t| add(DESCRIPTION, t));
                }
                TextField::ParamName => {
                    terms(text, Kind::Identifier, false, |t| add(PARAM_NAME, t));
                }
                TextField::ParamDescription => {
                    terms(text, Kind::Prose, false, |t| add(PARAM_DESCRIPTION, t));
                }
            });
        }
        let mut len = [0u32; FIELDS];
        for &(_, field) in &found {
            len[field] += 1;
        }
        found.sort_unstable();
        let mut i = 0;
        while i < found.len() {
            let term = found[i].0;
            let mut tf = [0u16; FIELDS];
            while i < found.len() && found[i].0 == term {
                let slot = &mut tf[found[i].1];
                *slot = slot.saturating_add(1);
                i += 1;
            }
            self.postings[term as usize].push(Posting { doc, tf });
        }
        for (sum, l) in self.len_sum.iter_mut().zip(len) {
            *sum += u64::from(l);
        }
        self.scratch = found;
        self.by_name.insert(def.name.clone(), doc);
        self.by_lower_name
            .entry(def.name.to_lowercase())
            .or_insert(doc);
        self.docs.push(Doc {
            name: def.name.clone(),
            short: short_description(&def.description),
            len,
        });
    }

    /// At most `k` hits for `query`, best first.
    ///
    /// `select:NAME` (or `select:a,b`) returns exactly the named tools that exist, in the order
    /// given, each with score 0; `k` does not cut an explicit selection. Otherwise a query that
    /// equals a tool's name (exactly, else ignoring case) puts that tool first, followed by the
    /// best-scoring others.
    pub fn search(&self, query: &str, k: usize) -> Vec<Hit> {
        let query = query.trim();
        if let Some(names) = strip_prefix_ignore_case(query, "select:") {
            let mut hits: Vec<Hit> = Vec::new();
            for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                if let Some(doc) = self.lookup(name)
                    && !hits.iter().any(|h| h.name == self.docs[doc as usize].name)
                {
                    hits.push(self.hit(doc, 0.0, Vec::new()));
                }
            }
            return hits;
        }
        if k == 0 || self.docs.is_empty() {
            return Vec::new();
        }
        let exact = self.lookup(query);
        let (scores, mut ranked, groups) = self.score(query);
        let order = |a: &u32, b: &u32| {
            scores[*b as usize]
                .total_cmp(&scores[*a as usize])
                .then_with(|| {
                    self.docs[*a as usize]
                        .name
                        .cmp(&self.docs[*b as usize].name)
                })
                .then(a.cmp(b))
        };
        if let Some(exact) = exact {
            ranked.retain(|&d| d != exact);
        }
        let want = k - usize::from(exact.is_some());
        if ranked.len() > want && want > 0 {
            ranked.select_nth_unstable_by(want - 1, order);
        }
        ranked.truncate(want);
        ranked.sort_unstable_by(order);
        let mut hits = Vec::with_capacity(k);
        if let Some(exact) = exact {
            hits.push(self.hit(exact, scores[exact as usize], self.matched(exact, &groups)));
        }
        hits.extend(
            ranked
                .iter()
                .map(|&d| self.hit(d, scores[d as usize], self.matched(d, &groups))),
        );
        hits
    }

    fn lookup(&self, name: &str) -> Option<u32> {
        self.by_name
            .get(name)
            .or_else(|| self.by_lower_name.get(&name.to_lowercase()))
            .copied()
    }

    /// The name of the tool inserted `position`-th (from 0).
    #[cfg(feature = "semantic")]
    pub(crate) fn name_at(&self, position: usize) -> &str {
        &self.docs[position].name
    }

    /// Where the tool named `name` was inserted (the newest of that name).
    #[cfg(feature = "semantic")]
    pub(crate) fn position_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).map(|&d| d as usize)
    }

    /// `word` as the index stores it (lower-cased, stemmed), if it is one plain word.
    #[cfg(feature = "semantic")]
    pub(crate) fn stem(&self, word: &str) -> Option<String> {
        let mut out = Vec::new();
        terms(word, Kind::Prose, false, |t| out.push(t.to_owned()));
        match <[String; 1]>::try_from(out) {
            Ok([stem]) => Some(stem),
            Err(_) => None,
        }
    }

    /// The stem of `word` ([`ToolIndex::stem`]) when the vocabulary has it.
    #[cfg(feature = "semantic")]
    pub(crate) fn known_stem(&self, word: &str) -> Option<String> {
        self.stem(word).filter(|s| self.terms.contains_key(s))
    }

    /// The hit for the tool inserted `position`-th (from 0), with `score`.
    #[cfg(feature = "semantic")]
    pub(crate) fn hit_by_position(&self, position: usize, score: f64) -> Hit {
        self.hit(position as u32, score, Vec::new())
    }

    fn hit(&self, doc: u32, score: f64, matched: Vec<String>) -> Hit {
        let doc = &self.docs[doc as usize];
        Hit {
            name: doc.name.clone(),
            description: doc.short.clone(),
            score,
            matched,
        }
    }

    /// The best member of each query group that `doc` contains, in query order.
    fn matched(&self, doc: u32, groups: &[QueryGroup]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for group in groups {
            let mut members: Vec<&(String, f64)> = group.iter().collect();
            members.sort_by(|a, b| b.1.total_cmp(&a.1));
            let found = members.into_iter().find(|(term, _)| {
                self.terms.get(term).is_some_and(|&id| {
                    self.postings[id as usize]
                        .binary_search_by_key(&doc, |p| p.doc)
                        .is_ok()
                })
            });
            if let Some((term, _)) = found
                && !out.contains(term)
            {
                out.push(term.clone());
            }
        }
        out
    }

    /// BM25F scores of every document (dense, zero when untouched) and the touched documents.
    /// Each query group contributes its best-scoring member per document.
    fn score(&self, query: &str) -> (Vec<f64>, Vec<u32>, Vec<QueryGroup>) {
        let n = self.docs.len();
        let mut scores = vec![0.0f64; n];
        let mut touched: Vec<u32> = Vec::new();
        let mut best = vec![0.0f64; n];
        let mut group_touched: Vec<u32> = Vec::new();
        let n_f = n as f64;
        let mut inv_avg = [0.0f64; FIELDS];
        for (inv, sum) in inv_avg.iter_mut().zip(self.len_sum) {
            *inv = if sum == 0 { 0.0 } else { n_f / sum as f64 };
        }
        let mut groups = query_groups(query);
        for group in &mut groups {
            self.add_corrections(group);
        }
        for group in &groups {
            for (term, weight) in group {
                let Some(&id) = self.terms.get(term) else {
                    continue;
                };
                let postings = &self.postings[id as usize];
                let df = postings.len() as f64;
                let idf = (1.0 + (n_f - df + 0.5) / (df + 0.5)).ln() * weight;
                for p in postings {
                    let doc = &self.docs[p.doc as usize];
                    let mut tf = 0.0;
                    for f in 0..FIELDS {
                        if p.tf[f] != 0 {
                            let norm = 1.0 - B[f] + B[f] * f64::from(doc.len[f]) * inv_avg[f];
                            tf += WEIGHTS[f] * f64::from(p.tf[f]) / norm;
                        }
                    }
                    let s = idf * tf * (K1 + 1.0) / (tf + K1);
                    let slot = &mut best[p.doc as usize];
                    if *slot == 0.0 {
                        group_touched.push(p.doc);
                    }
                    if s > *slot {
                        *slot = s;
                    }
                }
            }
            for d in group_touched.drain(..) {
                let slot = &mut scores[d as usize];
                if *slot == 0.0 {
                    touched.push(d);
                }
                *slot += best[d as usize];
                best[d as usize] = 0.0;
            }
        }
        (scores, touched, groups)
    }
}

impl ToolIndex {
    /// When the typed word of a group is not in the vocabulary, adds the vocabulary words one
    /// edit away (two for long words) at [`TYPO_WEIGHT`]: `screeshot` finds `screenshot`,
    /// `kuberntes` finds `kubernetes`.
    fn add_corrections(&self, group: &mut Vec<(String, f64)>) {
        let Some((typed, weight)) = group.first().cloned() else {
            return;
        };
        if weight < 1.0 || self.terms.contains_key(&typed) || !typo_candidate(&typed) {
            return;
        }
        let max = if typed.len() >= 8 { 2 } else { 1 };
        let mut found: Vec<u32> = Vec::new();
        let mut consider = |ids: Option<&Vec<u32>>| {
            for &id in ids.into_iter().flatten() {
                if !found.contains(&id) {
                    found.push(id);
                }
            }
        };
        // A vocabulary word with one letter more than the typed one, or the same deletion.
        consider(self.deletions.get(typed.as_str()));
        for_each_deletion(&typed, |d| {
            consider(self.deletions.get(d));
            if let Some(&id) = self.terms.get(d) {
                consider(Some(&vec![id]));
            }
        });
        for id in found {
            let word = &self.term_names[id as usize];
            if osa_distance(&typed, word, max) <= max && !group.iter().any(|(t, _)| **t == **word) {
                group.push((word.to_string(), TYPO_WEIGHT * weight));
            }
        }
    }
}

/// Weight of a vocabulary word found by typo tolerance, against 1 for a word typed.
const TYPO_WEIGHT: f64 = 0.8;
/// Words shorter than this are not corrected: `pr`, `k8s`, `ls` are words of their own.
const TYPO_MIN_LEN: usize = 4;

fn typo_candidate(term: &str) -> bool {
    term.len() >= TYPO_MIN_LEN && term.len() <= 24 && term.bytes().all(|b| b.is_ascii_lowercase())
}

/// Calls `f` with each distinct string made by deleting one byte of an ASCII `word`.
pub(crate) fn for_each_deletion(word: &str, mut f: impl FnMut(&str)) {
    let mut buf = String::with_capacity(word.len());
    let bytes = word.as_bytes();
    for i in 0..bytes.len() {
        // Deleting either letter of a double gives the same string: skip the repeat.
        if i > 0 && bytes[i] == bytes[i - 1] {
            continue;
        }
        buf.clear();
        buf.push_str(&word[..i]);
        buf.push_str(&word[i + 1..]);
        f(&buf);
    }
}

/// Optimal string alignment distance (edits: insert, delete, substitute, swap two adjacent
/// letters) between ASCII words, or `max + 1` once it must exceed `max`.
pub(crate) fn osa_distance(a: &str, b: &str, max: usize) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len().abs_diff(b.len()) > max {
        return max + 1;
    }
    let width = b.len() + 1;
    let mut rows = vec![0usize; width * (a.len() + 1)];
    for (j, cell) in rows.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        rows[i * width] = i;
        let mut row_min = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (rows[(i - 1) * width + j] + 1)
                .min(rows[i * width + j - 1] + 1)
                .min(rows[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(rows[(i - 2) * width + j - 2] + 1);
            }
            rows[i * width + j] = d;
            row_min = row_min.min(d);
        }
        if row_min > max {
            return max + 1;
        }
    }
    rows[a.len() * width + b.len()]
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

enum ParamText {
    Name,
    Description,
}

/// Where a text of a definition goes in the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextField {
    Name,
    Description,
    Origin,
    ParamName,
    ParamDescription,
}

/// Every text of `def` the index reads, in the order it reads them: what
/// [`ToolIndex::insert`] tokenises, and so what a shared index is known by (`shared.rs`).
pub(crate) fn for_each_text(def: &ToolDef, mut emit: impl FnMut(TextField, &str)) {
    emit(TextField::Name, &def.name);
    emit(TextField::Description, &def.description);
    if let Some(origin) = &def.origin {
        emit(TextField::Origin, origin);
    }
    let mut budget = PARAM_NODE_BUDGET;
    walk_params(
        &def.input_schema,
        &def.input_schema,
        0,
        &mut budget,
        &mut |field, text| match field {
            ParamText::Name => emit(TextField::ParamName, text),
            ParamText::Description => emit(TextField::ParamDescription, text),
        },
    );
}

/// Visits parameter names, descriptions and string enum values of an input schema: the
/// top-level properties and up to [`PARAM_LEVELS`] levels below them, through arrays, local
/// `$ref`s and `allOf`/`anyOf`/`oneOf`.
fn walk_params(
    schema: &Value,
    root: &Value,
    level: usize,
    budget: &mut usize,
    emit: &mut dyn FnMut(ParamText, &str),
) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    let Some(obj) = schema.as_object() else {
        return;
    };
    if let Some(target) = obj
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(root, r))
    {
        walk_params(target, root, level, budget, emit);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for variant in obj.get(key).and_then(Value::as_array).into_iter().flatten() {
            walk_params(variant, root, level, budget, emit);
        }
    }
    if let Some(items) = obj.get("items") {
        walk_params(items, root, level, budget, emit);
    }
    let Some(props) = obj.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, prop) in props {
        emit(ParamText::Name, name);
        if let Some(p) = prop.as_object() {
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                emit(ParamText::Description, d);
            }
            for v in p
                .get("enum")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(s) = v.as_str() {
                    emit(ParamText::Description, s);
                }
            }
        }
        if level < PARAM_LEVELS {
            walk_params(prop, root, level + 1, budget, emit);
        }
    }
}

/// Resolves a local JSON pointer reference (`#`, `#/$defs/X`, `#/definitions/X`, any
/// `#/a/b`), `None` for anything else.
pub(crate) fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    if !pointer.starts_with('/') {
        return None;
    }
    let mut node = root;
    for raw in pointer[1..].split('/') {
        let token = percent_decode(raw).replace("~1", "/").replace("~0", "~");
        node = match node {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

/// Decodes `%XX` escapes in a URI fragment; malformed escapes stay as they are.
fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, description: &str, schema: Value) -> ToolDef {
        ToolDef::new(name, description, schema)
    }

    fn names(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.name.as_str()).collect()
    }

    fn sample() -> ToolIndex {
        ToolIndex::build(&[
            tool(
                "write_file",
                "Write text to a file",
                json!({"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}),
            ),
            tool(
                "read_file",
                "Read a file",
                json!({"type":"object","properties":{"path":{"type":"string"}}}),
            ),
            tool("file", "A tool literally named file", json!({})),
            tool(
                "send_email",
                "Send an email message",
                json!({"type":"object","properties":{"to":{"type":"string","description":"Recipient address"}}}),
            ),
        ])
    }

    #[test]
    fn ts6_exact_name_ranks_first() {
        let index = sample();
        assert_eq!(names(&index.search("file", 5))[0], "file");
        assert_eq!(names(&index.search("write_file", 5))[0], "write_file");
        assert_eq!(names(&index.search("WRITE_FILE", 5))[0], "write_file");
    }

    #[test]
    fn ts6_select_returns_named_tools_in_order() {
        let index = sample();
        let hits = index.search("select:send_email, read_file,missing,send_email", 1);
        assert_eq!(names(&hits), ["send_email", "read_file"]);
    }

    #[test]
    fn ts6_at_most_k_hits() {
        let index = sample();
        assert_eq!(index.search("file", 2).len(), 2);
        assert!(index.search("file", 0).is_empty());
        assert!(index.search("zebra", 5).is_empty());
    }

    #[test]
    fn parameters_are_searchable() {
        let index = sample();
        assert_eq!(names(&index.search("recipient", 5)), ["send_email"]);
    }

    #[test]
    fn refs_resolve_through_pointers() {
        let root = json!({"$defs": {"a/b": {"x": 1}}, "list": [10, 20]});
        assert_eq!(resolve_ref(&root, "#/$defs/a~1b"), Some(&json!({"x": 1})));
        assert_eq!(resolve_ref(&root, "#/list/1"), Some(&json!(20)));
        assert_eq!(resolve_ref(&root, "#/%24defs/a~1b"), Some(&json!({"x": 1})));
        assert_eq!(resolve_ref(&root, "other.json#/x"), None);
        assert_eq!(resolve_ref(&root, "#"), Some(&root));
    }

    #[test]
    fn ts6_a_word_one_edit_away_finds_its_tool() {
        let index = sample();
        // Deletion, transposition, insertion and substitution of one letter.
        for query in [
            "sned an emial",
            "emal the report",
            "send an emaill",
            "writr text",
        ] {
            let hits = index.search(query, 3);
            assert!(!hits.is_empty(), "{query}: no hits");
            assert!(
                hits[0].name == "send_email" || hits[0].name == "write_file",
                "{query}: {:?}",
                names(&hits)
            );
        }
        assert_eq!(index.search("sned an emial", 1)[0].name, "send_email");
        // Short words are not corrected: `fle` is not `file`.
        assert!(index.search("fle", 5).is_empty());
    }

    #[test]
    fn osa_distance_counts_adjacent_swaps_as_one_edit() {
        assert_eq!(osa_distance("email", "emial", 2), 1);
        assert_eq!(osa_distance("email", "emai", 2), 1);
        assert_eq!(osa_distance("email", "email", 2), 0);
        assert_eq!(osa_distance("email", "xxxxx", 1), 2);
        assert_eq!(osa_distance("kubernetes", "kuberntes", 2), 1);
    }

    #[test]
    fn hits_name_the_query_terms_they_contain() {
        let index = sample();
        let hits = index.search("send an emial to someone", 5);
        assert_eq!(hits[0].name, "send_email");
        assert_eq!(hits[0].matched, ["send", "email"]);
        let hits = index.search("select:read_file", 5);
        assert!(hits[0].matched.is_empty());
    }
}
