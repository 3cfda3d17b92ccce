//! `ishiki-resources`: the resource center of the Ishiki tool-call pipeline.
//!
//! A *resource URL* says where data is read (RES-1). The [`ResourceCenter`] routes a full URL —
//! query and fragment included — to the [`SchemeHandler`] registered for its scheme; handlers
//! are registered at run time (RES-2). A [`FileScheme`] is a handler whose text has a directly
//! readable source: the center wraps it so that the built-in parameters `?offset=N`,
//! `?lines=A-B` and `?view=numbered` work the same for every file scheme, and each text read
//! returns a serializable [`ReadSource`] from which the next page can be read later (RES-3).
//!
//! Built in:
//! - `workspace://` — the sandbox's files, read and write, never outside its root (RES-4);
//! - `local://` — host files under configured roots, read only (RES-4);
//! - `artifact://<tool>/<name>` — an immutable, content-addressed snapshot store (RES-5);
//! - `asset://<UUID v7>` — inbound media with creation time and retention cleanup (RES-6, RES-9).
//!
//! A read returns a [`ReadResult`] in exactly the wire shape of RES-7:
//! `{ "type": "text", "text", "source"? }` or
//! `{ "type": "file", "url", "mediaType", "data" /* base64 */, "source"? }`.
//!
//! This crate knows nothing about models, tools, budgets or lifetimes.

mod error;
mod read;

pub use error::{Error, ErrorKind};
pub use read::{ReadResult, ReadSource};
mod center;
mod file_view;
mod handler;
mod media;

pub use center::{ResourceCenter, parse_url, whole_text_source};
pub use handler::{FileScheme, SchemeHandler};
pub use media::{MediaInfo, extension_for, image_dimensions, sniff};
mod artifact;
pub use artifact::{ArtifactStore, DiskArtifactStore, artifact_name, artifact_tool_component};
