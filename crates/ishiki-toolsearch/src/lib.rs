//! `ishiki-toolsearch`: the deferred tool pool, search ranking, catalog deltas and TypeScript
//! signatures of the Ishiki tool-call pipeline (requirements §3).
//!
//! An agent with many tools should not send all their definitions with every request. With
//! toolsearch on, only *resident* tools start in the [`Catalog`]; the others wait in a pool
//! (TS-1) until a search returns them. A hit joins the native tool list from the *next* step
//! (TS-2), appended at the end, so the request prefix a provider caches stays valid (TS-3);
//! each step's [`StepCatalog::delta`] says what joined, and [`delta_text`] announces it to the
//! model. Tools can be added at any time, MCP tools included (TS-5).
//!
//! [`ToolIndex`] ranks tools with BM25F over their name (split on `_`, `-`, `.` and camelCase),
//! description and parameter names and descriptions; an exact name, or `select:NAME`, ranks
//! first, and ties break by name (TS-6). [`signature`] renders a tool as a TypeScript
//! declaration a program calls as `tools.<name>(input)`: a member `<name>(input: In):
//! Promise<Out>` of `interface Tools`, valid TypeScript that `tsc --strict` compiles (TS-4).
//!
//! This crate knows nothing about how tools execute.
//!
//! # Example
//!
//! ```
//! use ishiki_toolsearch::{Catalog, DeltaForm, ToolDef, delta_text};
//! use serde_json::json;
//!
//! // Toolsearch on: deferred tools wait in a pool until a search finds them
//! // (`Catalog::without_toolsearch()` offers every tool from the first step).
//! let mut catalog = Catalog::with_toolsearch();
//! catalog.add(ToolDef { resident: true, ..ToolDef::new("search", "Find tools", json!({})) });
//! catalog.add(ToolDef::new(
//!     "write_file",
//!     "Write a file into the workspace.",
//!     json!({
//!         "type": "object",
//!         "properties": {
//!             "path": { "type": "string", "description": "Absolute path" },
//!             "content": { "type": "string" }
//!         },
//!         "required": ["path", "content"]
//!     }),
//! ));
//!
//! // Step 1: only the resident tool is in the list; the model searches.
//! let step1 = catalog.begin_step();
//! assert_eq!(step1.tools.len(), 1);
//! let hits = catalog.search("save text to a file", 5);
//! assert_eq!(hits[0].name, "write_file");
//!
//! // Step 2: the hit has joined, at the end, and is announced.
//! let step2 = catalog.begin_step();
//! assert_eq!(step2.tools[1].name, "write_file");
//! assert_eq!(step2.delta.len(), 1);
//! let text = delta_text(&step2.delta, DeltaForm::Signatures);
//! assert!(text.contains("interface Tools {\n  /** Write a file into the workspace. */\n  write_file(input: {"));
//! assert!(text.contains("/** Absolute path */"));
//! ```
//!
//! [`ToolIndex`] ranks tools on its own, without a catalog, pool or steps:
//!
//! ```
//! use ishiki_toolsearch::{DEFAULT_K, ToolDef, ToolIndex};
//! use serde_json::json;
//!
//! let tools = vec![
//!     ToolDef::new("write_file", "Write a file into the workspace.",
//!         json!({ "type": "object", "properties": { "path": { "type": "string" } } })),
//!     ToolDef::new("git_status", "Show the working tree status.", json!({ "type": "object" }))
//!         .with_origin("mcp:git"),
//! ];
//! let mut index = ToolIndex::build(&tools);
//!
//! // At most k hits, best first.
//! let hits = index.search("save text to a file", DEFAULT_K);
//! assert_eq!(hits[0].name, "write_file");
//!
//! // `select:` returns exactly the named tools that exist, in the order given.
//! let picked = index.search("select:git_status,write_file", DEFAULT_K);
//! assert_eq!(picked[0].name, "git_status");
//! assert_eq!(picked[1].name, "write_file");
//!
//! // Tools can be appended without a rebuild.
//! index.insert(&ToolDef::new("send_email", "Send an email message.", json!({ "type": "object" })));
//! assert_eq!(index.len(), 3);
//! assert_eq!(index.search("email someone", 1)[0].name, "send_email");
//! ```

mod catalog;
mod def;
mod delta;
mod error;
pub mod eval;
mod index;
#[cfg(feature = "semantic")]
pub mod semantic;
mod shared;
mod signature;
mod text;
mod thesaurus;

pub use catalog::{Catalog, CatalogState, StepCatalog};
pub use def::{Hit, SHORT_DESCRIPTION_CHARS, ToolDef, parse_definitions, short_description};
pub use delta::{DeltaForm, delta_text, removed_text};
pub use error::{ToolsearchError, ToolsearchErrorKind};
pub use index::{DEFAULT_K, ToolIndex};
pub use signature::{TOOLS_CONST, signature, signatures};
