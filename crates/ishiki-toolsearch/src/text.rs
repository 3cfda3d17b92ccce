//! Text normalization shared by indexing and querying: splitting names and prose into terms, a
//! tiny English stemmer, a short stopword list and query-side synonym groups.
//!
//! The same [`terms`] function runs over tool definitions and over queries, so whatever it does
//! to a word happens on both sides; only the thesaurus expansion is query-side.

use std::collections::HashSet;
use std::sync::OnceLock;

use crate::index::FastHash;
use crate::thesaurus::Thesaurus;

/// Words that carry no meaning for finding a tool ("I want to …", "the", "please").
const STOPWORDS: &[&str] = &[
    "a",
    "about",
    "all",
    "an",
    "and",
    "any",
    "anything",
    "are",
    "as",
    "at",
    "be",
    "by",
    "can",
    "could",
    "do",
    "does",
    "everything",
    "for",
    "from",
    "give",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "just",
    "let",
    "me",
    "my",
    "need",
    "of",
    "on",
    "or",
    "our",
    "please",
    "should",
    "so",
    "some",
    "something",
    "that",
    "the",
    "their",
    "them",
    "then",
    "there",
    "these",
    "this",
    "those",
    "to",
    "up",
    "us",
    "via",
    "want",
    "we",
    "what",
    "which",
    "with",
    "would",
    "you",
    "your",
];

/// Whether the text is an identifier (a tool or parameter name) or prose (a description, a
/// query). Identifiers are also split at camelCase boundaries; prose is not, so that `GitHub`
/// or `PRs` in a sentence stay one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Identifier,
    Prose,
}

/// Splits `text` into normalized terms and passes each to `emit`.
///
/// Words are split on anything that is not a letter or digit, lower-cased, stemmed; stopwords
/// and one-character words are dropped. An identifier is also split at camelCase boundaries
/// (`getHTTPResponse` → `get`, `http`, `respons`, and the whole `gethttprespons`). With
/// `keep_compounds`, a chunk that contained `_`, `-` or `.` between word characters (a tool
/// name like `write_file`) is also emitted whole, lower-cased, unstemmed — that is how a name
/// typed into a query finds its tool.
pub(crate) fn terms(text: &str, kind: Kind, keep_compounds: bool, emit: impl FnMut(&str)) {
    scan(text, kind, keep_compounds, false, emit);
}

fn scan(
    text: &str,
    kind: Kind,
    keep_compounds: bool,
    keep_stopwords: bool,
    mut emit: impl FnMut(&str),
) {
    let mut word = String::new();
    // `%` is a word of its own ("17% of 2340"); elsewhere it is not worth a term.
    let replaced;
    let text = if text.contains('%') {
        replaced = text.replace('%', " percent ");
        replaced.as_str()
    } else {
        text
    };
    for chunk in text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')')) {
        if chunk.is_empty() {
            continue;
        }
        if keep_compounds {
            let trimmed = chunk.trim_matches(|c: char| !c.is_alphanumeric());
            if trimmed.contains(['_', '-', '.']) {
                word.clear();
                push_lower(&mut word, trimmed);
                emit(&word);
            }
        }
        split_words(chunk, kind == Kind::Identifier, |w| {
            word.clear();
            push_lower(&mut word, w);
            if !keep_stopwords && (is_stopword(&word) || word.chars().nth(1).is_none()) {
                return;
            }
            stem_in_place(&mut word);
            if !word.is_empty() {
                emit(&word);
            }
        });
    }
}

/// The words of an identifier as written: split on anything not a letter or digit and at
/// camelCase boundaries (`getHTTPResponse` → `get`, `HTTP`, `Response`), no whole forms.
pub(crate) fn split_identifier(text: &str, mut emit: impl FnMut(&str)) {
    for part in text.split(|c: char| !c.is_alphanumeric()) {
        let mut start = 0;
        let mut chars = part.char_indices().peekable();
        let mut prev: Option<char> = None;
        while let Some((pos, c)) = chars.next() {
            let next_lower = chars.peek().is_some_and(|&(_, n)| n.is_lowercase());
            if is_camel_boundary(prev, c, next_lower) {
                emit(&part[start..pos]);
                start = pos;
            }
            prev = Some(c);
        }
        if start < part.len() {
            emit(&part[start..]);
        }
    }
}

/// `fooBar` and `s3Bucket` split before `B`; `HTTPResponse` splits before the `R` that starts
/// a lower-case run; digits stay attached (`base64`, `s3`, `mp3`).
fn is_camel_boundary(prev: Option<char>, c: char, next_lower: bool) -> bool {
    prev.is_some_and(|p| {
        ((p.is_lowercase() || p.is_ascii_digit()) && c.is_uppercase())
            || (p.is_uppercase() && c.is_uppercase() && next_lower)
    })
}

/// Splits one chunk on non-alphanumeric characters and, for identifiers, camelCase boundaries
/// (then the whole word too).
fn split_words(chunk: &str, camel: bool, mut emit: impl FnMut(&str)) {
    for part in chunk.split(|c: char| !c.is_alphanumeric()) {
        if part.is_empty() {
            continue;
        }
        if !camel {
            emit(part);
            continue;
        }
        let mut start = 0;
        let mut chars = part.char_indices().peekable();
        let mut prev: Option<char> = None;
        while let Some((pos, c)) = chars.next() {
            let next_lower = chars.peek().is_some_and(|&(_, n)| n.is_lowercase());
            if is_camel_boundary(prev, c, next_lower) {
                emit(&part[start..pos]);
                start = pos;
            }
            prev = Some(c);
        }
        if start == 0 {
            emit(part);
        } else {
            emit(&part[start..]);
            emit(part);
        }
    }
}

pub(crate) fn is_stopword(word: &str) -> bool {
    // Every stopword is short: most words are ruled out by length alone. A hash set, not a
    // binary search: this runs for every word of every tool when an index is built.
    static SET: OnceLock<HashSet<&'static str, FastHash>> = OnceLock::new();
    word.len() <= 10
        && SET
            .get_or_init(|| STOPWORDS.iter().copied().collect())
            .contains(word)
}

/// Appends `text` lower-cased to `out` (a fast path for ASCII, the common case).
fn push_lower(out: &mut String, text: &str) {
    if text.is_ascii() {
        let start = out.len();
        out.push_str(text);
        out[start..].make_ascii_lowercase();
    } else {
        out.extend(text.chars().flat_map(char::to_lowercase));
    }
}

fn is_vowel(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}

/// A deliberately small stemmer: plurals, `-ing`, `-ed`, a trailing `e` and `y`→`i`, so that
/// `file`/`files`, `create`/`created`/`creating` and `query`/`queries` meet. Words that are not
/// plain ASCII letters are left alone.
pub(crate) fn stem_in_place(word: &mut String) {
    if word.len() < 3 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return;
    }
    if word.len() == 3 {
        // Only plurals of short words: `prs`, `ids`, `vms` (but not `bus`, `gas`, `his`).
        if word.ends_with('s') && !matches!(&word[1..], "ss" | "us" | "is" | "as") {
            word.truncate(2);
        }
        return;
    }
    // Irregular forms common in requests ("the file I wrote", "messages sent").
    let irregular = match word.as_str() {
        "wrote" | "written" => Some("write"),
        "sent" => Some("send"),
        "made" => Some("make"),
        "found" => Some("find"),
        "took" | "taken" => Some("take"),
        "gave" | "given" => Some("give"),
        "children" => Some("child"),
        "people" => Some("person"),
        _ => None,
    };
    if let Some(base) = irregular {
        word.clear();
        word.push_str(base);
    }
    let bytes = word.as_bytes();
    let n = bytes.len();
    // Plurals.
    if word.ends_with("ies") && n > 4 {
        word.truncate(n - 2); // queries → queri
    } else if word.ends_with("sses") {
        word.truncate(n - 2);
    } else if word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is")
        && !word.ends_with("as")
    {
        word.truncate(n - 1);
    }
    // -ing / -ed, when a syllable remains (`string`, `bring`, `need` stay).
    let has_vowel = |s: &str| s.bytes().any(is_vowel);
    let mut stripped = false;
    for suffix in ["ing", "ed"] {
        if word.ends_with(suffix) {
            let stem_len = word.len() - suffix.len();
            if stem_len >= 3 && has_vowel(&word[..stem_len]) {
                word.truncate(stem_len);
                stripped = true;
            }
            break;
        }
    }
    // running → runn → run, stopped → stopp → stop; not add/pass/fill/buzz.
    if stripped {
        let b = word.as_bytes();
        let n = b.len();
        if n >= 4 {
            let (last, before) = (b[n - 1], b[n - 2]);
            if last == before
                && !is_vowel(last)
                && !matches!(last, b'l' | b's' | b'z')
                && is_vowel(b[n - 3])
                && !is_vowel(b[n - 4])
            {
                word.truncate(n - 1);
            }
        }
    }
    if word.len() > 2 && word.ends_with('y') {
        word.truncate(word.len() - 1);
        word.push('i');
    }
    if word.len() > 3 && word.ends_with('e') {
        word.truncate(word.len() - 1);
    }
}

/// One concept of a query: a word typed (weight 1, more if repeated) with its thesaurus
/// expansions (below 1), or the expansions of a phrase. A document scores by the best member
/// of each group, so a word's many synonyms cannot pile up, and the groups add up.
pub(crate) type QueryGroup = Vec<(String, f64)>;

/// The concept groups of a query, typed words first in order of appearance.
pub(crate) fn query_groups(query: &str) -> Vec<QueryGroup> {
    let mut groups: Vec<QueryGroup> = Vec::new();
    terms(query, Kind::Prose, true, |t| {
        match groups.iter_mut().find(|g| g[0].0 == t) {
            Some(group) => group[0].1 += 1.0,
            None => groups.push(vec![(t.to_owned(), 1.0)]),
        }
    });
    let typed: Vec<(String, f64)> = groups.iter().map(|g| g[0].clone()).collect();
    let mut sequence: Vec<String> = Vec::new();
    scan(query, Kind::Prose, false, true, |w| {
        sequence.push(w.to_owned())
    });
    Thesaurus::get().expand(&typed, &sequence, |key, t, w| {
        // A typed word is its own group's best member already.
        if typed.iter().any(|(s, _)| s == t) {
            return;
        }
        while groups.len() <= key {
            groups.push(Vec::new());
        }
        let group = &mut groups[key];
        match group.iter_mut().find(|(s, _)| s == t) {
            Some(entry) => entry.1 = entry.1.max(w),
            None => group.push((t.to_owned(), w)),
        }
    });
    groups.retain(|g| !g.is_empty());
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_terms(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        terms(text, Kind::Identifier, true, |t| out.push(t.to_owned()));
        out
    }

    fn prose_terms(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        terms(text, Kind::Prose, false, |t| out.push(t.to_owned()));
        out
    }

    fn stem(word: &str) -> String {
        let mut s = word.to_owned();
        stem_in_place(&mut s);
        s
    }

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOPWORDS);
    }

    #[test]
    fn ts6_names_split_on_separators_and_camel_case() {
        assert_eq!(all_terms("write_file"), ["write_file", "writ", "fil"]);
        assert_eq!(all_terms("git.log"), ["git.log", "git", "log"]);
        assert_eq!(
            all_terms("getHTTPResponse"),
            ["get", "http", "respons", "gethttprespons"]
        );
        assert_eq!(
            all_terms("list-pull-requests"),
            ["list-pull-requests", "list", "pull", "request"]
        );
        assert_eq!(
            all_terms("base64 s3Bucket"),
            ["base64", "s3", "bucket", "s3bucket"]
        );
    }

    #[test]
    fn prose_keeps_brand_words_whole() {
        assert_eq!(
            prose_terms("Which PRs on GitHub? 17% of x"),
            ["pr", "github", "17", "percent"]
        );
    }

    #[test]
    fn stemmer_joins_common_inflections() {
        for group in [
            &["file", "files"][..],
            &["create", "created", "creating", "creates"],
            &["query", "queries"],
            &["run", "running", "runs"],
            &["stop", "stopped", "stopping"],
            &["add", "added", "adds"],
            &["branch", "branches"],
            &["status", "statuses"],
            &["process", "processes"],
            &["copy", "copies", "copied", "copying"],
            &["write", "writes", "writing", "wrote", "written"],
        ] {
            let first = stem(group[0]);
            for w in group {
                assert_eq!(stem(w), first, "{w} vs {}", group[0]);
            }
        }
        assert_eq!(stem("string"), "string");
        assert_eq!(stem("alias"), "alias");
        assert_eq!(stem("need"), "need");
    }

    #[test]
    fn expansions_are_grouped_under_their_typed_word() {
        let groups = query_groups("remove the folder, remove it");
        assert_eq!(groups[0][0], ("remov".to_owned(), 2.0));
        assert!(groups[0].iter().any(|(t, w)| t == "delet" && *w < 1.0));
        assert_eq!(groups[1][0], ("folder".to_owned(), 1.0));
        assert!(groups[1].iter().any(|(t, _)| t == "directori"));
        // "delete" is typed: it is its own group, not a synonym of "remove".
        let groups = query_groups("delete or remove");
        assert_eq!(groups[0][0], ("delet".to_owned(), 1.0));
        assert!(!groups[1].iter().any(|(t, _)| t == "delet"));
    }
}
