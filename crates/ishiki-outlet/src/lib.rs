//! `ishiki-outlet`: the one exit of tool results on their way to the model.
//!
//! Every tool result — from a native tool call or the text protocol (OUT-1) — passes through an
//! [`Outlet`] after the tool's own `toModelOutput` chose its [`ToolDisplay`] (OUT-2). The outlet
//!
//! - archives media parts as `artifact://<tool>/<name>` and replaces them in the text by a
//!   [`marker`] `[attachment: URL; media/type; N bytes; WxH]` (OUT-3);
//! - keeps every page — body *and* its Continue line — within a [`Budget`] of 2000 lines and
//!   30,000 UTF-16 code units (OUT-4);
//! - stores over-long content whole, once, as an artifact, and pages from it: the producing tool
//!   is never called again (OUT-5, [`Outlet::emit`]);
//! - pages FileScheme text (`workspace://`, `local://`, existing artifacts) from its own URL and
//!   creates no artifact (OUT-6, [`Outlet::emit_read_text`]);
//! - never splits a UTF-8 sequence or a surrogate pair, reads a line longer than a page to its
//!   end, always advances, and emits no anchor at the end of the range, so the page bodies joined
//!   reproduce the range exactly (OUT-7).
//!
//! Nothing is truncated or dropped: Codex keeps head and tail, Claude Code a 2 KB preview; here
//! the model pages through everything exactly. The paging core, [`first_page`], is a pure
//! function; counting walks UTF-8 bytes once (no per-character allocation) and finds lines with
//! `memchr`.
//!
//! A page with a continuation is `body`, `\n`, then one line starting `[Continue` that holds
//! the `read` input for the next page ([`continue_line`]); removing that line and its `\n`
//! gives the body ([`Emitted::body`]).
//!
//! Archiving awaits the store ([`Outlet::emit`], [`Outlet::attach`] and [`Outlet::next_page`]
//! are async; paging itself is synchronous and pure). The crate depends only on
//! `ishiki-resources` (its part without the resource center: the store traits and media
//! sniffing), whose [`ArtifactStore`] and [`ReadSource`] it re-exports, and with the
//! feature `disk` its `DiskArtifactStore`, so a user needs no second dependency; it knows nothing
//! about projection, lifetimes or catalogs. [`Outlet::next_page`] follows a continuation into an
//! archived result; FileScheme continuations are read through the resource center.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use ishiki_outlet::{Budget, ToolDisplay, Outlet};
//! // With the `disk` feature, `ishiki_outlet::DiskArtifactStore` is the same type.
//! use ishiki_resources::DiskArtifactStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = Arc::new(DiskArtifactStore::open(dir.path())?);
//! let outlet = Outlet::new(store.clone()).with_budget(Budget::default().with_max_lines(6).with_max_units(1000));
//!
//! // A short result reaches the model unchanged.
//! let short = outlet.emit("bash", ToolDisplay::text("ok\n")).await?;
//! assert_eq!(short.text, "ok\n");
//! assert!(short.continuation.is_none());
//!
//! // A long one is archived once; the model sees a page and a Continue line.
//! let log: String = (1..=10).map(|n| format!("line {n}\n")).collect();
//! let first = outlet.emit("bash", ToolDisplay::text(log.clone())).await?;
//! assert_eq!(first.body(), "line 1\nline 2\nline 3\nline 4\n");
//! let next = first.continuation.clone().ok_or("no continuation")?;
//! assert!(next.url.starts_with("artifact://bash/") && next.url.ends_with("?offset=28"));
//! assert!(first.text.lines().last().is_some_and(|l| l.starts_with("[Continue")));
//!
//! // The next page comes from that artifact, never from the tool again. The rest fits: it is
//! // the last page, without an anchor.
//! let second = outlet.next_page(&next).await?;
//! assert_eq!(second.text, "line 5\nline 6\nline 7\nline 8\nline 9\nline 10\n");
//! assert!(second.continuation.is_none());
//! # Ok(())
//! # }
//! ```

mod display;
mod error;
mod outlet;
mod page;

pub use display::{DisplayPart, Media, MediaRef, ToolDisplay, marker};
pub use error::{OutletError, OutletErrorKind};
pub use outlet::{Continuation, DEFAULT_READER, Emitted, Outlet, continue_line};
pub use page::{Budget, Cut, first_page, line_count, utf16_len};

#[cfg(feature = "disk")]
pub use ishiki_resources::DiskArtifactStore;
pub use ishiki_resources::{ArtifactStore, ReadSource};
