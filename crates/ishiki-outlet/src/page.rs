//! The pure paging core (OUT-4, OUT-7): measuring text in UTF-16 code units and lines, and
//! choosing where the first page of a text ends.
//!
//! Everything here is a function over data, so proptest can hammer it. Counting walks the UTF-8
//! bytes directly — a lead byte of a 1-, 2- or 3-byte sequence is one UTF-16 unit, a 4-byte lead
//! is two (a surrogate pair), continuation bytes are none — in fixed blocks the compiler
//! vectorises. While choosing a page, units and `\n`s are counted in that same pass, so a page
//! is read once; `memchr` finds the line end to cut at and counts the lines of a whole text.
//! Nothing is allocated per character.

use memchr::{memchr_iter, memrchr};
use serde::{Deserialize, Serialize};

/// The display budget of one page: the body *together with* its Continue line (OUT-4).
///
/// Lines are counted the way [`str::lines`] counts them over the whole page text: a page
/// `body + "\n" + continue_line` has `newlines(body) + 2` lines, so a body of `k` complete lines
/// leaves the separator's blank line and the Continue line on top (`k + 2`). A text that is not
/// paged has [`line_count`] lines.
///
/// # Minimum
///
/// Paging always advances by at least one character (OUT-7), even when the budget is too small
/// to hold it. For every page to fit, the budget must admit the Continue line, its separating
/// `\n` and the widest character (two units): `max_units ≥ utf16_len(continue_line) + 3`, and a
/// body holding one line end: `max_lines ≥ 3`. Below that a page holds exactly one character
/// and may exceed the budget — progress wins, so paging never loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Budget {
    /// Most lines a page may have, Continue line included.
    pub max_lines: usize,
    /// Most UTF-16 code units a page may have, Continue line and separator included.
    pub max_units: usize,
}

impl Budget {
    /// The default line budget (OUT-4).
    pub const DEFAULT_MAX_LINES: usize = 2000;
    /// The default UTF-16 code unit budget (OUT-4).
    pub const DEFAULT_MAX_UNITS: usize = 30_000;

    /// The same budget with at most `max_lines` lines per page, Continue line included.
    ///
    /// Two setters rather than `new(usize, usize)`: two counts of the same type are easy to
    /// swap. `Budget::default().with_max_lines(6).with_max_units(1000)`.
    pub fn with_max_lines(self, max_lines: usize) -> Self {
        Self { max_lines, ..self }
    }

    /// The same budget with at most `max_units` UTF-16 code units per page, Continue line and
    /// separator included.
    pub fn with_max_units(self, max_units: usize) -> Self {
        Self { max_units, ..self }
    }

    /// True when `text` is shown whole: at most `max_lines` lines and `max_units` units.
    pub fn fits(&self, text: &str) -> bool {
        // A unit takes at most three UTF-8 bytes, so a longer text cannot fit: answer without
        // scanning a huge remainder once per page.
        if text.len() / 3 > self.max_units {
            return false;
        }
        utf16_len(text) <= self.max_units && line_count(text) <= self.max_lines
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_lines: Self::DEFAULT_MAX_LINES,
            max_units: Self::DEFAULT_MAX_UNITS,
        }
    }
}

/// Bytes per block of the counting loops: small enough for `u8` accumulators (at most two
/// units per byte), large enough for the compiler to vectorise.
const BLOCK: usize = 64;

/// UTF-16 code units of one UTF-8 byte: its lead-byte weight.
#[inline(always)]
fn unit_weight(b: u8) -> u8 {
    // Continuation bytes 0x80..=0xBF are the only bytes below -64 as `i8`; 4-byte leads are
    // 0xF0..=0xF4 and add the second unit of their surrogate pair.
    u8::from((b as i8) >= -64) + u8::from(b >= 0xF0)
}

/// UTF-16 units of one block. Mostly-ASCII text (logs, code) takes the cheaper OR-reduction:
/// one unit per byte.
#[inline]
fn block_units(block: &[u8]) -> usize {
    if block.iter().fold(0u8, |acc, &b| acc | b) < 0x80 {
        return block.len();
    }
    block_weights(block)
}

#[inline]
fn block_weights(block: &[u8]) -> usize {
    let mut n = 0u8;
    for &b in block {
        n += unit_weight(b);
    }
    usize::from(n)
}

fn units_of(bytes: &[u8]) -> usize {
    let mut blocks = bytes.chunks_exact(BLOCK);
    let mut total = 0usize;
    for block in &mut blocks {
        total += block_units(block);
    }
    total + block_units(blocks.remainder())
}

/// The length of `text` in UTF-16 code units, counted over its UTF-8 bytes in one pass.
pub fn utf16_len(text: &str) -> usize {
    units_of(text.as_bytes())
}

/// The number of lines in `text`: its `\n`s, plus one for a last line without `\n`.
/// `""` has 0 lines, `"a"` and `"a\n"` have 1, `"a\n\n"` has 2.
pub fn line_count(text: &str) -> usize {
    let bytes = text.as_bytes();
    let newlines = memchr_iter(b'\n', bytes).count();
    newlines + usize::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// UTF-16 units and `\n`s of one block, in one pass over its bytes.
#[inline]
fn block_units_and_newlines(block: &[u8]) -> (usize, usize) {
    let mut newlines = 0u8;
    let mut or = 0u8;
    for &b in block {
        or |= b;
        newlines += u8::from(b == b'\n');
    }
    let units = if or < 0x80 {
        block.len()
    } else {
        block_weights(block)
    };
    (units, usize::from(newlines))
}

/// The longest prefix of `bytes` (a whole `str` or a prefix ending on a char boundary) of at
/// most `max_units` UTF-16 units and `max_newlines` line ends; always a char boundary.
///
/// Units and line ends are counted together in one pass: the page-sized prefix is read once,
/// at the speed of a plain line count.
fn prefix_within(bytes: &[u8], max_units: usize, max_newlines: usize) -> usize {
    let mut units = 0usize;
    let mut newlines = 0usize;
    let mut pos = 0usize;
    // Whole blocks first. A block may end inside a character whose lead it already counted;
    // the byte loop below only ever stops at a lead byte, so that is harmless.
    while let Some(block) = bytes.get(pos..pos + BLOCK) {
        let (u, n) = block_units_and_newlines(block);
        if units + u > max_units || newlines + n > max_newlines {
            break;
        }
        units += u;
        newlines += n;
        pos += BLOCK;
    }
    while let Some(&b) = bytes.get(pos) {
        let weight = usize::from(unit_weight(b));
        if weight > 0 {
            if units + weight > max_units {
                return pos;
            }
            if b == b'\n' {
                if newlines == max_newlines {
                    return pos;
                }
                newlines += 1;
            }
            units += weight;
        }
        pos += 1;
    }
    pos
}

/// The room a Continue line takes on a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reserve {
    units: usize,
    lines: usize,
}

impl Reserve {
    fn of(line: &str) -> Self {
        Self {
            // The `\n` separating body and Continue line.
            units: utf16_len(line) + 1,
            // The separator ends the body's last line; the Continue line is at least one line.
            lines: 1 + memchr_iter(b'\n', line.as_bytes()).count() + 1,
        }
    }

    fn covers(&self, other: &Reserve) -> bool {
        other.units <= self.units && other.lines <= self.lines
    }

    fn max(self, other: Reserve) -> Reserve {
        Reserve {
            units: self.units.max(other.units),
            lines: self.lines.max(other.lines),
        }
    }
}

/// Where the first page of a text ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Byte length of the page body: a char boundary of the text, `> 0` unless the text is
    /// empty, and the whole text when `continue_line` is `None`.
    pub body_len: usize,
    /// The Continue line for this cut, or `None` when the text fits whole (end of the range).
    pub continue_line: Option<String>,
}

impl Cut {
    /// The page text the model sees: the body alone when it is the end of the range, otherwise
    /// body, `\n`, Continue line (docs/scenario-format.md "Transcript events").
    pub fn page_text(&self, text: &str) -> String {
        let body = text.get(..self.body_len).unwrap_or(text);
        match &self.continue_line {
            None => body.to_owned(),
            Some(line) => {
                let mut page = String::with_capacity(body.len() + 1 + line.len());
                page.push_str(body);
                page.push('\n');
                page.push_str(line);
                page
            }
        }
    }
}

/// Chooses the first page of `text` under `budget` (OUT-4, OUT-7).
///
/// `continue_line(cut)` gives the Continue line shown when the body is `text[..cut]`; its
/// length may grow with `cut` (more offset digits), and the page is sized so that body,
/// separator and that very line fit together.
///
/// - A text that [fits](Budget::fits) is returned whole with no Continue line.
/// - Otherwise the body is the longest prefix that fits, shortened to end after its last `\n`
///   when it has one (pages end on line ends); a line longer than the page is cut mid-line at
///   the largest char boundary that fits, so it is still read to its end across pages.
/// - A cut never splits a UTF-8 sequence, hence never a UTF-16 surrogate pair.
/// - The body is never empty: below the [minimum budget](Budget#minimum) it is one character.
///
/// The work is proportional to the page, not to the text: a 256 MiB remainder costs the same
/// as a 90 KB one. A `continue_line` whose length shrinks and grows again with `cut` is retried
/// a few times with a larger reserve, then accepted as it is.
pub fn first_page(
    text: &str,
    budget: Budget,
    mut continue_line: impl FnMut(usize) -> String,
) -> Cut {
    if budget.fits(text) {
        return Cut {
            body_len: text.len(),
            continue_line: None,
        };
    }
    // Offsets only grow with the cut, so the line for the whole text is the longest one in
    // practice; the loop also copes with a line function that is not monotone.
    let mut reserve = Reserve::of(&continue_line(text.len()));
    let mut attempts = 0;
    loop {
        let cut = cut_with_reserve(text, budget, reserve);
        if cut == text.len() {
            // Only a budget below the minimum gets here (a forced one-character page of a
            // one-character text): the range ends, so no anchor to an empty page.
            return Cut {
                body_len: cut,
                continue_line: None,
            };
        }
        let line = continue_line(cut);
        let needed = Reserve::of(&line);
        attempts += 1;
        if reserve.covers(&needed) || cut == first_char_len(text) || attempts >= 4 {
            return Cut {
                body_len: cut,
                continue_line: Some(line),
            };
        }
        reserve = reserve.max(needed);
    }
}

fn first_char_len(text: &str) -> usize {
    text.chars().next().map_or(0, char::len_utf8)
}

/// The body length for a page whose Continue line takes `reserve`.
fn cut_with_reserve(text: &str, budget: Budget, reserve: Reserve) -> usize {
    let bytes = text.as_bytes();
    let max_units = budget.max_units.saturating_sub(reserve.units);
    let max_newlines = budget.max_lines.saturating_sub(reserve.lines);
    // A prefix of `max_units` units spans at most three bytes per unit: never look further,
    // however long the text (a 256 MiB single line costs one page of work per page). The scan
    // stops at a lead byte before a shorter window's end, which therefore need not be a char
    // boundary; not touching the byte there saves a cache miss per page.
    let window = bytes
        .len()
        .min(max_units.saturating_mul(3).saturating_add(4));
    let mut fit = prefix_within(&bytes[..window], max_units, max_newlines);
    while !text.is_char_boundary(fit) {
        // Unreachable by the bound above; kept so a cut is a char boundary whatever happens.
        fit -= 1;
    }
    let cut = match memrchr(b'\n', &bytes[..fit]) {
        Some(newline) => newline + 1,
        None => fit,
    };
    if cut == 0 { first_char_len(text) } else { cut }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(cut: usize) -> String {
        format!("[Continue at {cut}]")
    }

    #[test]
    fn out4_units_count_surrogate_pairs_twice() {
        for s in ["", "a", "é", "中", "😀", "a😀中\r\n", "\u{10FFFF}\u{FFFF}"] {
            assert_eq!(utf16_len(s), s.encode_utf16().count(), "{s:?}");
        }
        let long = "ab😀中é\n".repeat(1000);
        assert_eq!(utf16_len(&long), long.encode_utf16().count());
    }

    #[test]
    fn out4_line_count_matches_str_lines() {
        for s in ["", "a", "a\n", "a\n\n", "\n", "a\r\nb", "a\nb\n"] {
            assert_eq!(line_count(s), s.lines().count(), "{s:?}");
        }
    }

    #[test]
    fn out4_short_text_is_whole_without_anchor() {
        let cut = first_page(
            "hello\n",
            Budget {
                max_lines: 3,
                max_units: 100,
            },
            line,
        );
        assert_eq!(cut.body_len, 6);
        assert_eq!(cut.continue_line, None);
        assert_eq!(cut.page_text("hello\n"), "hello\n");
    }

    #[test]
    fn out7_cut_prefers_line_end() {
        let text = "one\ntwo\nthree four five six seven\n";
        let cut = first_page(
            text,
            Budget {
                max_lines: 100,
                max_units: 30,
            },
            line,
        );
        // "[Continue at 34]" is 16 units, plus the separator: 13 units of body remain.
        assert_eq!(&text[..cut.body_len], "one\ntwo\n");
        assert_eq!(cut.continue_line.as_deref(), Some("[Continue at 8]"));
    }

    #[test]
    fn out7_long_line_cut_mid_line_on_char_boundary() {
        let text = "😀".repeat(100);
        let cut = first_page(
            &text,
            Budget {
                max_lines: 100,
                max_units: 30,
            },
            line,
        );
        // 30 - 18 (Continue line and separator) = 12 units: six astral characters, never half a
        // surrogate pair.
        assert_eq!(cut.body_len, 6 * 4);
    }

    #[test]
    fn out7_tiny_budget_still_advances_one_char() {
        let cut = first_page(
            "😀😀",
            Budget {
                max_lines: 1,
                max_units: 1,
            },
            line,
        );
        assert_eq!(cut.body_len, 4);
        assert!(cut.continue_line.is_some());
    }

    #[test]
    fn out7_forced_last_character_has_no_anchor() {
        let cut = first_page(
            " ",
            Budget {
                max_lines: 0,
                max_units: 0,
            },
            line,
        );
        assert_eq!(cut.body_len, 1);
        assert_eq!(cut.continue_line, None);
    }

    #[test]
    fn out4_line_budget_counts_separator_and_continue_line() {
        let text = "a\n".repeat(10);
        let cut = first_page(
            &text,
            Budget {
                max_lines: 5,
                max_units: 1000,
            },
            line,
        );
        // 3 body lines + the separator's blank line + the Continue line = 5 lines.
        assert_eq!(&text[..cut.body_len], "a\na\na\n");
        assert_eq!(cut.page_text(&text).lines().count(), 5);
    }
}
