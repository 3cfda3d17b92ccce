//! Spelling correction of a query before it is embedded. The model has never seen `termnal`
//! or `isue`: WordPiece cuts a misspelt word into pieces that mean something else, and the
//! query's vector drifts away from every tool. The lexical ranker corrects such words against
//! its own vocabulary (stemmed terms); the embedder needs a word as written, so this keeps the
//! catalog's words as they are spelled (`terminal`, `issue`) and puts the nearest one in place
//! of a word that neither the model, nor the catalog, nor the lexical index knows.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::index::{FastHash, ToolIndex, for_each_deletion, osa_distance};

/// Words shorter than this are neither corrected nor offered as corrections (`pr`, `k8s`,
/// `per`, `val` are words of their own, and a three-letter word is one edit from dozens).
const MIN_LEN: usize = 4;
/// Longer words are not corrected (no real word is, and each costs a deletion per letter).
const MAX_LEN: usize = 24;
/// From this length on a word may be two edits from its correction, as in the lexical index.
const TWO_EDITS_FROM: usize = 8;

/// The catalog's words as written, each with how often tool texts use it, under each of its
/// one-letter deletions (symmetric deletion: a candidate one edit away shares a deletion).
#[derive(Debug, Clone, Default)]
pub(crate) struct Speller {
    ids: HashMap<Box<str>, u32, FastHash>,
    words: Vec<(Box<str>, u32)>,
    deletions: HashMap<Box<str>, Vec<u32>, FastHash>,
}

/// A plain lower-case ASCII word of a length worth correcting.
fn plain(word: &str) -> bool {
    (MIN_LEN..=MAX_LEN).contains(&word.len()) && word.bytes().all(|b| b.is_ascii_lowercase())
}

/// Whether `a` and `b` have the same letters (a swap, the commonest slip of the fingers).
fn same_letters(a: &str, b: &str) -> bool {
    let mut a = a.as_bytes().to_vec();
    let mut b = b.as_bytes().to_vec();
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

impl Speller {
    /// Adds the words of one tool text.
    pub(crate) fn add_text(&mut self, text: &str) {
        for word in text.split(|c: char| !c.is_alphanumeric()) {
            let word = word.to_ascii_lowercase();
            if !plain(&word) {
                continue;
            }
            if let Some(&id) = self.ids.get(word.as_str()) {
                let count = &mut self.words[id as usize].1;
                *count = count.saturating_add(1);
                continue;
            }
            let Ok(id) = u32::try_from(self.words.len()) else {
                return;
            };
            for_each_deletion(&word, |d| {
                self.deletions.entry(d.into()).or_default().push(id)
            });
            self.ids.insert(word.as_str().into(), id);
            self.words.push((word.into(), 1));
        }
    }

    /// The catalog word nearest to `word` (lower-case): one edit away (two for words of
    /// [`TWO_EDITS_FROM`] letters or more, keeping the first letter), preferring fewer edits,
    /// then the same letters swapped, then the word the catalog uses most, then the first in
    /// alphabetical order; only candidates `accept` takes. `None` when `word` is a catalog
    /// word or nothing is near.
    pub(crate) fn correction(&self, word: &str, accept: impl Fn(&str) -> bool) -> Option<&str> {
        if !plain(word) || self.ids.contains_key(word) {
            return None;
        }
        let max = if word.len() >= TWO_EDITS_FROM { 2 } else { 1 };
        let mut found: Vec<u32> = Vec::new();
        let mut consider = |ids: Option<&Vec<u32>>| {
            for &id in ids.into_iter().flatten() {
                if !found.contains(&id) {
                    found.push(id);
                }
            }
        };
        consider(self.deletions.get(word));
        for_each_deletion(word, |d| {
            consider(self.deletions.get(d));
            if let Some(&id) = self.ids.get(d) {
                consider(Some(&vec![id]));
            }
        });
        found
            .into_iter()
            .filter_map(|id| {
                let (candidate, count) = &self.words[id as usize];
                let edits = osa_distance(word, candidate, max);
                let first_kept = candidate.as_bytes().first() == word.as_bytes().first();
                (edits <= max && (edits < 2 || first_kept) && accept(candidate)).then_some((
                    edits,
                    !same_letters(word, candidate),
                    u32::MAX - count,
                    &**candidate,
                ))
            })
            .min()
            .map(|(_, _, _, candidate)| candidate)
    }

    /// `query` with each word that the model does not know whole (`knows`) and the catalog
    /// does not use replaced by its [`Speller::correction`]; everything else as typed. A word
    /// whose stem the lexical index knows is only replaced by a word of the same stem: the
    /// lexical ranker reads `runing` and `creat` as `running` and `create` already, and the
    /// model should too; but `browse` is not a slip for `browser`.
    pub(crate) fn correct<'q>(
        &self,
        query: &'q str,
        lexical: &ToolIndex,
        knows: impl Fn(&str) -> bool,
    ) -> Cow<'q, str> {
        let mut out = String::new();
        let mut copied = 0;
        let mut start = None;
        let fix = |from: usize, to: usize, out: &mut String, copied: &mut usize| {
            let word = query[from..to].to_ascii_lowercase();
            if knows(&word) {
                return;
            }
            let stem = lexical.known_stem(&word);
            let accept = |candidate: &str| {
                stem.as_ref()
                    .is_none_or(|s| lexical.stem(candidate).as_ref() == Some(s))
            };
            if let Some(better) = self.correction(&word, accept) {
                out.push_str(&query[*copied..from]);
                out.push_str(better);
                *copied = to;
            }
        };
        for (i, c) in query.char_indices() {
            match (c.is_alphanumeric(), start) {
                (true, None) => start = Some(i),
                (false, Some(from)) => {
                    fix(from, i, &mut out, &mut copied);
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(from) = start {
            fix(from, query.len(), &mut out, &mut copied);
        }
        if copied == 0 {
            return Cow::Borrowed(query);
        }
        out.push_str(&query[copied..]);
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::def::ToolDef;

    fn speller(texts: &[&str]) -> Speller {
        let mut s = Speller::default();
        for t in texts {
            s.add_text(t);
        }
        s
    }

    #[test]
    fn a_word_one_edit_from_a_catalog_word_is_corrected() {
        let s = speller(&["Start a terminal command", "Create an issue"]);
        let any = |_: &str| true;
        assert_eq!(s.correction("termnal", any), Some("terminal"));
        assert_eq!(s.correction("comand", any), Some("command"));
        assert_eq!(s.correction("isue", any), Some("issue"));
        assert_eq!(s.correction("creat", any), Some("create"));
        assert_eq!(s.correction("terminal", any), None, "a catalog word stays");
        assert_eq!(s.correction("zebra", any), None, "nothing near");
        assert_eq!(s.correction("kil", any), None, "too short to judge");
        assert_eq!(
            s.correction("isue", |c: &str| c != "issue"),
            None,
            "refused"
        );
    }

    #[test]
    fn ties_go_to_a_swap_then_to_the_commoner_word() {
        let s = speller(&["from from from from", "fork a repository"]);
        let any = |_: &str| true;
        assert_eq!(
            s.correction("frok", any),
            Some("fork"),
            "a swap beats a commoner word"
        );
        let s = speller(&["lead lead", "load"]);
        assert_eq!(s.correction("lxad", any), Some("lead"));
    }

    #[test]
    fn two_edits_only_for_long_words_that_keep_their_first_letter() {
        let s = speller(&["create a repository"]);
        let any = |_: &str| true;
        assert_eq!(s.correction("repositroy", any), Some("repository"));
        assert_eq!(
            s.correction("recreate", any),
            None,
            "two edits at the front is another word"
        );
        assert_eq!(s.correction("crete", any), Some("create"));
        assert_eq!(
            s.correction("crtae", any),
            None,
            "two edits in a short word"
        );
    }

    #[test]
    fn the_query_keeps_everything_but_the_words_it_corrects() {
        let texts = [
            "kill a process",
            "show running processes",
            "start a terminal command",
            "open a browser",
        ];
        let s = speller(&texts);
        let lexical = ToolIndex::build(&[
            ToolDef::new("kill_process", texts[0], serde_json::json!({})),
            ToolDef::new("list_processes", texts[1], serde_json::json!({})),
            ToolDef::new("browse", "Browse the web", serde_json::json!({})),
        ]);
        let knows = |w: &str| matches!(w, "the" | "with" | "pid" | "a" | "start" | "show");
        assert_eq!(
            s.correct("Kil the PROCES with pid 4242!", &lexical, knows),
            "Kil the process with pid 4242!"
        );
        assert_eq!(
            s.correct("start a termnal comand", &lexical, knows),
            "start a terminal command"
        );
        assert!(matches!(
            s.correct("start a process", &lexical, knows),
            Cow::Borrowed(_)
        ));
        // A word whose stem the lexical index knows becomes only a word of that stem:
        // `runing` reads as `running` there, but `browse` is no slip for `browser`.
        assert_eq!(
            s.correct("show runing browse", &lexical, knows),
            "show running browse"
        );
    }
}
