//! `send_message` element-mode markup (SEND-1, SEND-2): a message is tokenized as HTML (by
//! html5gum, a WHATWG tokenizer, so `<IMG SRC=x>`, unquoted values, duplicate attributes and
//! entities read as a browser reads them) and rebuilt from what is allowed. Nothing the model
//! wrote reaches the platform verbatim as markup:
//!
//! - `<img>` keeps `src`, `alt`, `title`, `width` and `height`; its `src` becomes a
//!   [`Piece::Image`] the caller resolves through the allowed schemes. Every other attribute
//!   (`srcset`, `data-src`, `onerror`, `style`, …) is removed and reported.
//! - A small set of formatting tags ([`FORMATTING_TAGS`]) is kept without any attribute.
//! - Every other tag (`<picture>`, `<source>`, `<svg>`, `<image>`, `<script>`, `<a>`,
//!   `<iframe>`, `<video>`, …), comments and doctypes are escaped, so the user reads them as
//!   text; escaped tags are reported.
//! - Text is re-escaped (`&`, `<`, `>`), so no character sequence in it becomes a tag.
//!
//! The function is pure and linear in the message; it never panics (fuzzed by
//! `fuzz/fuzz_targets/send_message_markup.rs`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use html5gum::{DefaultEmitter, HtmlString, Span, Spanned, StartTag, Token, Tokenizer};

/// Tags kept as markup (without attributes): they show text, and fetch or run nothing.
pub const FORMATTING_TAGS: [&str; 31] = [
    "b",
    "strong",
    "i",
    "em",
    "u",
    "s",
    "del",
    "ins",
    "mark",
    "small",
    "sub",
    "sup",
    "code",
    "kbd",
    "pre",
    "p",
    "br",
    "hr",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "span",
    "div",
    "q",
];

/// The attributes an `<img>` keeps besides `src`: none of them fetches or runs anything.
pub const IMG_ATTRIBUTES: [&str; 4] = ["alt", "title", "width", "height"];

/// The most reports one message gives; the rest are counted in one last line.
pub const MAX_REPORTS: usize = 32;

/// A message rebuilt from what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Markup {
    /// The message in order: safe HTML and the images the caller resolves.
    pub pieces: Vec<Piece>,
    /// What was escaped or removed, one sentence each (at most [`MAX_REPORTS`] + 1).
    pub removed: Vec<String>,
}

/// One piece of a rebuilt message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Markup that is safe to send as it is.
    Html(String),
    /// An `<img>` element: the `src` as written (entities decoded; empty when it has none)
    /// and its kept attributes, serialized (` alt="…"`), for `<img src="…"{attributes}/>`.
    Image {
        /// The image reference.
        src: String,
        /// The kept attributes, each with a leading space, values escaped.
        attributes: String,
    },
}

impl Markup {
    fn html(&mut self, text: &str) {
        if let Some(Piece::Html(last)) = self.pieces.last_mut() {
            last.push_str(text);
        } else {
            self.pieces.push(Piece::Html(text.to_owned()));
        }
    }
}

/// Collects reports without repeating one and without growing past [`MAX_REPORTS`].
#[derive(Debug, Default)]
struct Reports {
    seen: Vec<String>,
    more: usize,
}

impl Reports {
    fn add(&mut self, report: String) {
        if self.seen.contains(&report) {
            return;
        }
        if self.seen.len() < MAX_REPORTS {
            self.seen.push(report);
        } else {
            self.more += 1;
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.more > 0 {
            self.seen
                .push(format!("…and {} more removed or escaped", self.more));
        }
        self.seen
    }
}

/// Rebuilds one element-mode message from what is allowed (see the module docs).
pub fn parse(message: &str) -> Markup {
    let mut markup = Markup::default();
    let mut reports = Reports::default();
    let mut emitter = DefaultEmitter::<usize>::new_with_span();
    // `<script>`, `<style>`, `<textarea>`, `<title>`, `<plaintext>`…: their content is text, as
    // in a browser, so an `<img>` inside one is not an image (the tag itself is escaped).
    emitter.naively_switch_states(true);
    for token in Tokenizer::new_with_emitter(message, emitter) {
        let Ok(token) = token;
        match token {
            Token::StartTag(tag) => start_tag(&tag, message, &mut markup, &mut reports),
            Token::EndTag(tag) => {
                let name = lossy(&tag.name);
                if name != "img" && FORMATTING_TAGS.contains(&name.as_str()) {
                    markup.html(&format!("</{name}>"));
                } else {
                    markup.html(&escape_text(&original(message, tag.span, || {
                        format!("</{name}>")
                    })));
                }
            }
            Token::String(Spanned { value, .. }) => markup.html(&escape_text(&lossy(&value))),
            Token::Comment(Spanned { value, span }) => {
                markup.html(&escape_text(&original(message, span, || {
                    format!("<!--{}-->", lossy(&value))
                })));
            }
            Token::Doctype(doctype) => {
                markup.html(&escape_text(&original(message, doctype.span, || {
                    format!("<!DOCTYPE {}>", lossy(&doctype.name))
                })));
            }
            // The tokenizer recovers from every error and goes on; what it recovered to is
            // what a browser would read.
            Token::Error(_) => {}
        }
    }
    markup.removed = reports.finish();
    markup
}

fn start_tag(tag: &StartTag<usize>, message: &str, markup: &mut Markup, reports: &mut Reports) {
    let name = lossy(&tag.name);
    if name == "img" {
        let src = tag
            .attributes
            .get(b"src".as_slice())
            .map(|v| lossy(&v.value))
            .unwrap_or_default();
        let mut attributes = String::new();
        for (key, value) in &tag.attributes {
            let key = lossy(key);
            if key == "src" {
                continue;
            }
            if IMG_ATTRIBUTES.contains(&key.as_str()) {
                let _ = write!(
                    attributes,
                    " {key}=\"{}\"",
                    escape_attribute(&lossy(&value.value))
                );
            } else {
                reports.add(format!(
                    "attribute `{key}` of <img> removed: an <img> keeps only src, {}",
                    IMG_ATTRIBUTES.join(", ")
                ));
            }
        }
        markup.pieces.push(Piece::Image { src, attributes });
    } else if FORMATTING_TAGS.contains(&name.as_str()) {
        remove_attributes(&name, &tag.attributes, reports);
        markup.html(&format!(
            "<{name}{}>",
            if tag.self_closing { "/" } else { "" }
        ));
    } else {
        reports.add(format!(
            "<{name}> escaped: only <img> and formatting tags are sent as markup"
        ));
        markup.html(&escape_text(&original(message, tag.span, || {
            format!("<{name}>")
        })));
    }
}

fn remove_attributes(
    name: &str,
    attributes: &BTreeMap<HtmlString, Spanned<HtmlString, usize>>,
    reports: &mut Reports,
) {
    for key in attributes.keys() {
        reports.add(format!(
            "attribute `{}` of <{name}> removed: formatting tags keep no attributes",
            lossy(key)
        ));
    }
}

/// The text of `span` as the model wrote it, or `fallback` when the span is not a piece of it.
fn original(message: &str, span: Span<usize>, fallback: impl FnOnce() -> String) -> String {
    message
        .get(span.start..span.end)
        .filter(|s| !s.is_empty())
        .map_or_else(fallback, str::to_owned)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// An attribute value for `"…"`: the text escapes plus the quote.
pub fn escape_attribute(value: &str) -> String {
    escape_text(value).replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(src: &str, attributes: &str) -> Piece {
        Piece::Image {
            src: src.to_owned(),
            attributes: attributes.to_owned(),
        }
    }

    #[test]
    fn img_tags_are_read_as_a_browser_reads_them() {
        // Upper case, unquoted, and the first of two `src` wins, as in a browser.
        let markup =
            parse("<IMG SRC=workspace:///a.png ALT=x><img src=http://e/b src=artifact://c>");
        assert_eq!(
            markup.pieces,
            [
                image("workspace:///a.png", " alt=\"x\""),
                image("http://e/b", "")
            ]
        );
        assert_eq!(markup.removed, Vec::<String>::new());
    }

    #[test]
    fn text_never_becomes_markup_when_rebuilt() {
        let markup = parse("1 &lt; 2 & 3 > 2 <b onclick=x>ok</b> <script>x<img src=a></script>");
        assert_eq!(
            markup.pieces,
            [Piece::Html(
                "1 &lt; 2 &amp; 3 &gt; 2 <b>ok</b> &lt;script&gt;x&lt;img src=a&gt;&lt;/script&gt;"
                    .to_owned()
            )]
        );
        assert_eq!(
            markup.removed,
            [
                "attribute `onclick` of <b> removed: formatting tags keep no attributes",
                "<script> escaped: only <img> and formatting tags are sent as markup",
            ]
        );
    }

    /// Issue 24: only the first lowercase `src=` of an `<img>` was checked and the rest went
    /// to the platform verbatim. Every attribute that can fetch or run something is removed
    /// and reported, and the tags that fetch through their own attributes are escaped.
    #[test]
    fn an_img_keeps_no_attribute_that_fetches_and_fetching_tags_are_escaped() {
        let markup = parse(concat!(
            "<img SRC=workspace:///a.png srcset=\"http://e/x 2x\" data-src=http://e/y ",
            "onerror=alert(1) alt=ok>",
            "<picture><source srcset=http://e/z></picture>",
            "<svg><image href=http://e/w /></svg>",
        ));
        assert_eq!(
            markup.pieces,
            [
                image("workspace:///a.png", " alt=\"ok\""),
                Piece::Html(
                    "&lt;picture&gt;&lt;source srcset=http://e/z&gt;&lt;/picture&gt;\
                     &lt;svg&gt;&lt;image href=http://e/w /&gt;&lt;/svg&gt;"
                        .to_owned()
                ),
            ]
        );
        let kept = "an <img> keeps only src, alt, title, width, height";
        assert_eq!(
            markup.removed,
            [
                format!("attribute `data-src` of <img> removed: {kept}"),
                format!("attribute `onerror` of <img> removed: {kept}"),
                format!("attribute `srcset` of <img> removed: {kept}"),
                "<picture> escaped: only <img> and formatting tags are sent as markup".to_owned(),
                "<source> escaped: only <img> and formatting tags are sent as markup".to_owned(),
                "<svg> escaped: only <img> and formatting tags are sent as markup".to_owned(),
                "<image> escaped: only <img> and formatting tags are sent as markup".to_owned(),
            ]
        );
    }

    #[test]
    fn reports_are_capped_and_counted() {
        let message: String = (0..100).map(|k| format!("<x{k}>")).collect();
        let markup = parse(&message);
        assert_eq!(markup.removed.len(), MAX_REPORTS + 1);
        assert_eq!(
            markup.removed.last().map(String::as_str),
            Some("…and 68 more removed or escaped")
        );
    }
}
