//! The built-in FileScheme parameters (RES-3): `?lines=A-B`, `?view=numbered`, `?offset=N`.
//!
//! Order of application: select the lines, render the view, then skip `offset` bytes of the
//! rendered view. The read source names the URL without `offset`, so a continuation only moves
//! the offset and keeps range and view.

use url::Url;

use crate::media::sniff;
use crate::url_text::truncate_for_message;
use crate::{ReadResult, ReadSource, ResourceError, ResourceErrorKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FileView {
    offset: Option<u64>,
    lines: Option<(u64, u64)>,
    numbered: bool,
}

fn bad(message: String) -> ResourceError {
    ResourceError::new(ResourceErrorKind::InvalidParameter, message)
}

impl FileView {
    pub(crate) fn from_url(url: &Url) -> Result<Self, ResourceError> {
        let mut view = FileView::default();
        let mut seen: Vec<String> = Vec::new();
        for (key, value) in url.query_pairs() {
            if seen.iter().any(|k| *k == key) {
                return Err(bad(format!("parameter `{key}` is given more than once")));
            }
            seen.push(key.to_string());
            match key.as_ref() {
                "offset" => {
                    let n = value.parse::<u64>().map_err(|_| {
                        bad(format!(
                            "parameter `offset` must be a byte offset (a whole number ≥ 0), not `{}`",
                            truncate_for_message(&value)
                        ))
                    })?;
                    view.offset = Some(n);
                }
                "lines" => view.lines = Some(parse_lines(&value)?),
                "view" => match value.as_ref() {
                    "numbered" => view.numbered = true,
                    "plain" => view.numbered = false,
                    other => {
                        return Err(bad(format!(
                            "parameter `view` must be `numbered` or `plain`, not `{}`",
                            truncate_for_message(other)
                        )));
                    }
                },
                other => {
                    return Err(bad(format!(
                        "unknown parameter `{}` (file URLs take offset, lines and view)",
                        truncate_for_message(other)
                    )));
                }
            }
        }
        Ok(view)
    }

    /// Turns the loaded bytes into the read result this view asks for.
    pub(crate) fn apply(
        &self,
        url: &Url,
        bytes: Vec<u8>,
        snapshot: bool,
    ) -> Result<ReadResult, ResourceError> {
        let info = sniff(&bytes);
        let is_text = info.media_type.starts_with("text/");
        if !is_text {
            if *self != FileView::default() {
                return Err(bad(format!(
                    "`{url}` is {} media: offset, lines and view apply only to text",
                    info.media_type
                )));
            }
            let mut clean = url.clone();
            clean.set_fragment(None);
            return Ok(ReadResult::File {
                url: clean.to_string(),
                media_type: info.media_type,
                data: bytes,
                source: None,
            });
        }
        // UTF-16 text (with its byte-order mark) is read as the text it holds.
        let utf16 = match info.media_type.as_str() {
            crate::media::UTF16LE => crate::media::decode_utf16(&bytes, true),
            crate::media::UTF16BE => crate::media::decode_utf16(&bytes, false),
            _ => None,
        };
        let bytes = match utf16 {
            Some(text) => text.into_bytes(),
            None => bytes,
        };
        let text = String::from_utf8(bytes).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::InvalidData,
                format!(
                    "`{url}` is not valid UTF-8 text (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            )
        })?;
        let selected = match self.lines {
            Some((first, last)) => select_lines(&text, first, last),
            None => text.as_str(),
        };
        let rendered = if self.numbered {
            number_lines(selected, self.lines.map_or(1, |(first, _)| first))
        } else {
            selected.to_owned()
        };
        let total = rendered.len() as u64;
        let offset = self.offset.unwrap_or(0);
        if offset > total {
            return Err(bad(format!(
                "parameter `offset` is {offset}, past the end of the text ({total} bytes)"
            )));
        }
        // Offsets come from continuations we produced, but a model may type one by hand.
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        if !rendered.is_char_boundary(start) {
            return Err(bad(format!(
                "parameter `offset` {offset} falls inside a UTF-8 character"
            )));
        }
        let mut base = url.clone();
        base.set_fragment(None);
        let kept: Vec<(String, String)> = url
            .query_pairs()
            .filter(|(k, _)| k != "offset")
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        if kept.is_empty() {
            base.set_query(None);
        } else {
            base.query_pairs_mut().clear().extend_pairs(kept);
        }
        let body = rendered[start..].to_owned();
        Ok(ReadResult::Text {
            text: body,
            source: Some(ReadSource {
                url: base.to_string(),
                offset,
                total,
                snapshot,
            }),
        })
    }
}

fn parse_lines(value: &str) -> Result<(u64, u64), ResourceError> {
    let err = || {
        bad(format!(
            "parameter `lines` must be `A-B` with 1 ≤ A ≤ B (1-based, inclusive), not `{}`",
            truncate_for_message(value)
        ))
    };
    let (a, b) = value.split_once('-').ok_or_else(err)?;
    let a: u64 = a.trim().parse().map_err(|_| err())?;
    let b: u64 = b.trim().parse().map_err(|_| err())?;
    if a == 0 || b < a {
        return Err(err());
    }
    Ok((a, b))
}

/// Lines `first..=last` (1-based), each with its line ending; past the end selects what exists.
fn select_lines(text: &str, first: u64, last: u64) -> &str {
    let mut start = None;
    let mut line = 1u64;
    if first == 1 {
        start = Some(0);
    }
    for (i, _) in text.match_indices('\n') {
        line += 1;
        if line == first {
            start = Some(i + 1);
        }
        if line == last + 1 {
            return start.map_or("", |s| &text[s..=i]);
        }
    }
    start.map_or("", |s| &text[s..])
}

/// `cat -n` style: the line number right-aligned in six columns, a tab, the line.
fn number_lines(text: &str, first: u64) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        out.push_str(&format!("{:>6}\t", first + i as u64));
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn res3_lines_select_inclusive_ranges() {
        let text = "a\nb\nc\nd\n";
        assert_eq!(select_lines(text, 1, 1), "a\n");
        assert_eq!(select_lines(text, 2, 3), "b\nc\n");
        assert_eq!(select_lines(text, 4, 9), "d\n");
        assert_eq!(select_lines(text, 5, 9), "");
        assert_eq!(select_lines("x\ny", 2, 2), "y");
    }

    #[test]
    fn res3_numbered_view_is_cat_n() {
        assert_eq!(number_lines("a\nb", 9), "     9\ta\n    10\tb");
    }
}
