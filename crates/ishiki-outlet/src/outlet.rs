//! [`Outlet`]: turns a tool's display or a FileScheme text into exactly what the model sees —
//! media archived and marked (OUT-3), text within the budget (OUT-4), over-long content
//! archived once and paged from the artifact (OUT-5), file text paged from its own URL (OUT-6).

use std::sync::Arc;

use ishiki_resources::{ArtifactStore, ReadSource, extension_for, image_dimensions, media_type_of};
use serde::{Deserialize, Serialize};

use crate::display::{DisplayPart, Media, MediaRef, ToolDisplay, marker};
use crate::error::{OutletError, OutletErrorKind};
use crate::page::{Budget, first_page};

/// The one exit of tool results on their way to the model.
///
/// Cheap to clone; clones share the artifact store.
#[derive(Debug, Clone)]
pub struct Outlet {
    artifacts: Arc<dyn ArtifactStore>,
    budget: Budget,
    /// The tool the Continue line tells the model to call (`read` unless set).
    reader: String,
}

/// The tool a Continue line names unless the outlet is told otherwise
/// ([`Outlet::with_reader`]): Ishiki's built-in `read`.
pub const DEFAULT_READER: &str = "read";

/// What the model sees of one tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Emitted {
    /// Exactly the text the model sees: the whole text, or a page body, `\n` and one line
    /// starting `[Continue` that names [`Continuation::url`].
    pub text: String,
    /// The media archived (or reused) for this result, in display order (OUT-3, PRJ-1).
    pub attachments: Vec<MediaRef>,
    /// How to read the next page, or `None` at the end of the requested range (OUT-7).
    pub continuation: Option<Continuation>,
}

impl Emitted {
    /// The page body: [`Emitted::text`] without its Continue line and the `\n` before it.
    /// The bodies of all pages joined reproduce the requested range (OUT-7).
    pub fn body(&self) -> &str {
        match self.continuation {
            // The Continue line is one line (its URL is JSON-escaped), so the last `\n` is
            // the separator.
            Some(_) => self
                .text
                .rfind('\n')
                .map_or(self.text.as_str(), |at| &self.text[..at]),
            None => &self.text,
        }
    }
}

/// The next page: the input of a `read` call, `{"url": url}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Continuation {
    /// The URL to read; its FileScheme interprets the `offset` parameter (RES-3, OUT-6).
    pub url: String,
}

/// The Continue line shown under a page body: it starts with `[Continue`, names the tool that
/// reads URLs (`reader`, [`DEFAULT_READER`] in Ishiki) with the input that fetches the next page
/// (the URL verbatim, as a JSON string), and says where the shown text ends within the whole
/// (`shown`, `total`: bytes of the source's view). Both numbers only grow with the page, so
/// the line's length does too, as [`first_page`](crate::first_page) expects.
///
/// ```
/// use ishiki_outlet::{DEFAULT_READER, continue_line};
/// assert_eq!(
///     continue_line(DEFAULT_READER, "artifact://bash/0123456789abcdef.txt?offset=59990", 59990, 120000),
///     r#"[Continue: read {"url":"artifact://bash/0123456789abcdef.txt?offset=59990"} — shown up to byte 59990 of 120000]"#
/// );
/// ```
pub fn continue_line(reader: &str, url: &str, shown: u64, total: u64) -> String {
    // JSON-escaping keeps the line one line and copy-pasteable as a tool input; resource URLs
    // contain nothing it would change.
    let url = serde_json::to_string(url).unwrap_or_else(|_| format!("\"{url}\""));
    format!("[Continue: {reader} {{\"url\":{url}}} — shown up to byte {shown} of {total}]")
}

/// True for URLs whose bytes are already persisted and immutable enough to reuse (CM-7).
fn is_persisted(url: &str) -> bool {
    let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
    scheme.eq_ignore_ascii_case("artifact") || scheme.eq_ignore_ascii_case("asset")
}

impl Outlet {
    /// An outlet archiving into `artifacts`, with the default budget (2000 lines, 30,000
    /// UTF-16 code units).
    pub fn new(artifacts: Arc<dyn ArtifactStore>) -> Self {
        Self {
            artifacts,
            budget: Budget::default(),
            reader: DEFAULT_READER.to_owned(),
        }
    }

    /// The same outlet with Continue lines naming `reader`, the embedder's tool that reads
    /// resource URLs with a `url` input, instead of [`DEFAULT_READER`]. A longer name makes
    /// the line longer, which the page budget must leave room for (see [`Budget`]).
    pub fn with_reader(mut self, reader: impl Into<String>) -> Self {
        self.reader = reader.into();
        self
    }

    /// The same outlet with another page budget (see [`Budget`] for its minimum).
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// The page budget.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Emits any tool's display (OUT-1, OUT-2).
    ///
    /// Media parts are archived as `artifact://<tool>/<name>` (or reused, see [`Media::url`])
    /// and replaced by their [`marker`] on a line of its own (OUT-3). If the resulting text is
    /// over budget, it is stored whole, once, as `artifact://<tool>/<hash>.txt` and the model
    /// gets its first page with a continuation into that artifact (OUT-5): later pages are
    /// reads of the artifact, never calls of the tool. A text within budget is returned
    /// unchanged, with no artifact and no continuation.
    pub async fn emit(&self, tool: &str, display: ToolDisplay) -> Result<Emitted, OutletError> {
        let mut text = String::new();
        let mut attachments = Vec::new();
        let mut after_marker = false;
        for part in display.parts {
            match part {
                DisplayPart::Text(part) => {
                    if part.is_empty() {
                        continue;
                    }
                    if after_marker && !part.starts_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&part);
                    after_marker = false;
                }
                DisplayPart::Media(media) => {
                    let r = self.attach(tool, media).await?;
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&marker(&r));
                    attachments.push(r);
                    after_marker = true;
                }
            }
        }
        if self.budget.fits(&text) {
            return Ok(Emitted {
                text,
                attachments,
                continuation: None,
            });
        }
        let url = self
            .artifacts
            .put(tool, text.as_bytes(), "txt")
            .await
            .map_err(|e| {
                OutletError::new(
                    OutletErrorKind::Archive,
                    format!("cannot archive the output of `{tool}` to page it: {e}"),
                )
            })?;
        let source = ReadSource {
            url,
            offset: 0,
            total: text.len() as u64,
            snapshot: true,
        };
        let (text, continuation) = self.page(&text, &source);
        Ok(Emitted {
            text,
            attachments,
            continuation,
        })
    }

    /// Emits the text of a FileScheme read — a `ReadResult::Text` that came with a source —
    /// paged with the source's own URL (OUT-6). Creates no artifact: the scheme reads the next
    /// page from the continuation's `offset`. A live source may have changed by then (OUT-8).
    pub fn emit_read_text(&self, text: &str, source: &ReadSource) -> Emitted {
        let (text, continuation) = self.page(text, source);
        Emitted {
            text,
            attachments: Vec::new(),
            continuation,
        }
    }

    /// The next page of an *archived* result: reads the artifact behind `continuation` from this
    /// outlet's store and pages it from the continuation's `offset` (OUT-5, OUT-7). The artifact
    /// is a snapshot, so every page comes from the same bytes (OUT-8).
    ///
    /// Continuations of FileScheme text (`workspace://`, `local://`) are read through the
    /// resource center instead, which owns those schemes: pass the URL to its `read` and the
    /// result to [`Outlet::emit_read_text`]. Such a continuation is an error here.
    pub async fn next_page(&self, continuation: &Continuation) -> Result<Emitted, OutletError> {
        let fail = |message: String| OutletError::new(OutletErrorKind::Continuation, message);
        let (url, query) = continuation
            .url
            .split_once('?')
            .unwrap_or((continuation.url.as_str(), ""));
        if !url.starts_with("artifact://") {
            return Err(fail(format!(
                "{url} is not an artifact; read it through the resource center"
            )));
        }
        let mut offset = 0usize;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("offset", value)) => {
                    offset = value
                        .parse()
                        .map_err(|_| fail(format!("offset {value:?} is not a byte offset")))?;
                }
                _ => return Err(fail(format!("unexpected parameter {pair:?} in {url}"))),
            }
        }
        let bytes = self
            .artifacts
            .get(url)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|_| fail(format!("{url} is not text")))?;
        let rest = text
            .get(offset..)
            .ok_or_else(|| fail(format!("offset {offset} is not inside {url}")))?;
        let source = ReadSource {
            url: url.to_owned(),
            offset: offset as u64,
            total: text.len() as u64,
            snapshot: true,
        };
        Ok(self.emit_read_text(rest, &source))
    }

    /// Archives one media item for an attachment list (codemode's final `attachments[]`,
    /// CM-7), without any text: bytes become `artifact://<tool>/<name>`, an already persisted
    /// `artifact://` or `asset://` URL is reused as is.
    pub async fn attach(&self, tool: &str, media: Media) -> Result<MediaRef, OutletError> {
        // The bytes decide: a declared type that the bytes contradict is corrected (issue 13).
        let media_type = media_type_of(&media.media_type, &media.data);
        let dimensions = if media_type.starts_with("image/") {
            image_dimensions(&media.data)
        } else {
            None
        };
        let url = match media.url {
            Some(url) if is_persisted(&url) => url,
            _ => self
                .artifacts
                .put(tool, &media.data, extension_for(&media_type))
                .await
                .map_err(|e| {
                    OutletError::new(
                        OutletErrorKind::Archive,
                        format!("cannot archive {media_type} media of `{tool}`: {e}"),
                    )
                })?,
        };
        Ok(MediaRef {
            url,
            media_type,
            bytes: media.data.len() as u64,
            dimensions,
        })
    }

    /// The first page of `text`, which starts at `source.offset` of the source's view.
    fn page(&self, text: &str, source: &ReadSource) -> (String, Option<Continuation>) {
        let cut = first_page(text, self.budget, |cut| {
            let shown = source.offset.saturating_add(cut as u64);
            continue_line(
                &self.reader,
                &source.continue_url(cut as u64),
                shown,
                source.total,
            )
        });
        let page = cut.page_text(text);
        let continuation = cut.continue_line.as_ref().map(|_| Continuation {
            url: source.continue_url(cut.body_len as u64),
        });
        (page, continuation)
    }
}
