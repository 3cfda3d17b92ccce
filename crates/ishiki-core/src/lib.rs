//! `ishiki-core`: the Ishiki runtime, where the capability crates become one agent step.
//!
//! The other crates each own one idea — `ishiki-resources` (resource URLs and `read`),
//! `ishiki-outlet` (display budget, artifacts, media markers), `ishiki-projection` (which
//! attachment bytes a request carries), `ishiki-toolsearch` (the tool pool and catalog deltas)
//! and `ishiki-codemode` (programs that call tools). This crate composes them: it assembles a
//! profile with its models, runs the step loop (project a request, call the model, persist the
//! response with its delivery state, execute tool calls, pass results through the outlet) and
//! keeps history in a [`HistoryStore`].
//!
//! The parts:
//! - [`Runtime`] and [`RuntimeBuilder`]: the step loop (`prepare` → model → `commit` →
//!   `execute`, or [`Runtime::step_with`]), inbound messages, withdrawal, asset cleanup; the
//!   built-in tools `read`, `search`, `codemode`, `send_message`, `finish` and `wait`;
//! - [`Tool`], [`Model`], [`Platform`], [`VisionModel`] and [`Clock`]: what an embedder plugs in;
//! - [`Profile`], [`ModelsDoc`] and [`assemble`]: profile and `models.yaml` assembly with
//!   defaults, unknown-key checks and errors that name the key path, line and column
//!   (requirements §1, PRO-1..PRO-8);
//! - with feature `semantic` (off by default), `load_semantic_model`: the model
//!   `toolsearch.semantic.model` names, so `search` ranks by meaning and words together (TS-7);
//! - [`HistoryStore`] with `SqliteStore` (embedded, WAL; feature `sqlite`, on by default) and
//!   [`MemoryStore`], or any store given to [`RuntimeBuilder::store`]: atomic batches of
//!   records, attachment records, delivery state and catalog (PRJ-13, SEC-4);
//! - [`text_protocol`]: tool calls written in text, for models without native tool calling
//!   (TP-1).
//!
//! # Example
//!
//! A runtime with one tool, driven for two steps by a scripted model: the first response calls
//! the tool, the second answers in text.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use ishiki_core::{assemble, Model, ModelError, ModelResponse, ModelsDoc, Profile, Request, Runtime};
//! use ishiki_core::{Tool, ToolCall, ToolContext, ToolDef, ToolError};
//! use serde_json::{json, Value};
//!
//! #[derive(Debug)]
//! struct Add;
//!
//! #[async_trait::async_trait]
//! impl Tool for Add {
//!     fn definition(&self) -> ToolDef {
//!         let schema = json!({ "type": "object", "required": ["a", "b"], "properties": {
//!             "a": { "type": "integer" }, "b": { "type": "integer" } } });
//!         ToolDef { resident: true, ..ToolDef::new("add", "Add two integers.", schema) }
//!     }
//!     async fn execute(&self, input: Value, _: &ToolContext) -> Result<Value, ToolError> {
//!         Ok(json!(input["a"].as_i64().unwrap_or(0) + input["b"].as_i64().unwrap_or(0)))
//!     }
//! }
//!
//! /// Answers each request with the next scripted response.
//! #[derive(Debug)]
//! struct Scripted(Mutex<Vec<ModelResponse>>);
//!
//! #[async_trait::async_trait]
//! impl Model for Scripted {
//!     async fn respond(&self, _: &Request) -> Result<ModelResponse, ModelError> {
//!         let mut script = self.0.lock().map_err(|e| ModelError::permanent(e.to_string()))?;
//!         script.pop().ok_or_else(|| ModelError::permanent("the script has ended"))
//!     }
//! }
//!
//! let models = ModelsDoc::from_yaml("models:\n  main: { input: [text, image] }\n")?;
//! let assembly = assemble(Profile::default(), models, "main")?;
//! let state = tempfile::tempdir()?;
//! let tokio = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let mut runtime =
//!     tokio.block_on(Runtime::builder(assembly, state.path()).tool(Arc::new(Add)).build())?;
//! tokio.block_on(runtime.add_user_message("m1", "What is 2 + 3?", &[]))?;
//!
//! let add = ToolCall { id: "c1".into(), name: "add".into(), input: json!({ "a": 2, "b": 3 }) };
//! let model = Scripted(Mutex::new(vec![
//!     ModelResponse::from_text("2 + 3 = 5."), // popped last
//!     ModelResponse::from_calls([add]),
//! ]));
//! let reports = tokio.block_on(runtime.step_with(&model))?;
//! assert_eq!((reports[0].call_id.as_str(), reports[0].text.as_str()), ("c1", "5"));
//! let reports = tokio.block_on(runtime.step_with(&model))?;
//! assert!(reports.is_empty()); // a text answer: nothing to run
//! assert_eq!(runtime.step(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Assembly on its own: a profile whose vision side-model is a group, for a main model that
//! reads text only.
//!
//! ```
//! use ishiki_core::{assemble, ModelsDoc, Profile};
//!
//! let profile = Profile::from_yaml(
//!     "codemode: { enable: true }\n\
//!      attachment:\n  visionModel: vision-pool\n  recentImageCount: 5\n",
//! )?;
//! let models = ModelsDoc::from_yaml(
//!     "models:\n  main: { input: [text], toolCalling: text }\n  eye: { input: [text, image] }\n\
//!      groups:\n  vision-pool: [eye]\n",
//! )?;
//! let assembly = assemble(profile, models, "main")?;
//!
//! assert!(assembly.profile.codemode.enable);
//! assert_eq!(assembly.profile.attachment.recent_image_count, 5);
//! // PRO-8: the profile allows images, but the main model does not declare them.
//! assert!(!assembly.image_input);
//! assert_eq!(assembly.vision.map(|v| v.candidates), Some(vec!["eye".to_owned()]));
//!
//! // Errors name the key path, line and column (PRO-7).
//! let error = Profile::from_yaml("attachment:\n  maxImageCount: 0\n").unwrap_err();
//! assert_eq!(error.code(), "invalid_profile");
//! assert_eq!(
//!     error.message(),
//!     "attachment.maxImageCount: must be at least 1, found 0 (line 2, column 18)"
//! );
//! # Ok::<(), ishiki_core::AssemblyError>(())
//! ```

mod archives;
mod attachment;
mod builtin;
pub mod clock;
pub mod context;
mod convert;
mod decode;
pub mod edits;
mod error;
pub(crate) mod guard;
mod ids;
pub mod located;
pub mod markup;
pub mod platform;
pub mod profile;
mod registry;
mod rejection;
mod runtime;
mod schemas;
mod state_dir;
pub mod store;
pub mod text_protocol;

pub use attachment::AttachmentInfo;
pub use clock::{Clock, ManualClock, SystemClock};
pub use edits::{EditPolicy, EditReport};
pub use error::{RuntimeError, RuntimeErrorKind};
pub use guard::AbandonedWork;
/// The model boundary, from `ishiki-model` (core's modules name it `crate::message`).
pub(crate) use ishiki_model as message;
pub use ishiki_model::{
    Compacted, DeltaEntry, MediaPart, Message, Model, ModelError, ModelErrorKind, ModelResponse,
    Part, Reasoning, Request, Role, ToolCall, ToolSpec, Usage,
};
pub use ishiki_tool::{Tool, ToolContext, ToolError, ToolErrorKind, ToolSet};
pub use platform::{NullPlatform, Platform, VisionModel};
#[cfg(feature = "semantic")]
pub use profile::load_semantic_model;
pub use profile::{Assembly, AssemblyError, AssemblyErrorKind, ModelsDoc, Profile, assemble};
pub use rejection::image_rejection;
pub use runtime::{CallReport, CompactionRequest, Prepared, Runtime, RuntimeBuilder, check_tool};
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
pub use store::{Durability, HistoryStore, MemoryStore, StoreError, StoreErrorKind};

/// Re-exported so tool authors and embedders need no direct dependency for these types.
#[cfg(feature = "codemode")]
pub use ishiki_codemode::{Limits, Sandbox, SandboxConfig, WorkerSpawn, run_if_worker};
pub use ishiki_outlet::{Budget, DisplayPart, Media, ToolDisplay};
pub use ishiki_projection::{AttachmentConfig, Lifetime};
pub use ishiki_resources::{
    ArtifactStore, AssetStore, FileScheme, ResourceCenter, SchemeHandler, WorkspaceScheme,
};
pub use ishiki_toolsearch::ToolDef;
/// The sentence-embedding model of `toolsearch.semantic` ([`load_semantic_model`]); one loaded
/// model can serve many runtimes ([`RuntimeBuilder::semantic_model`]).
#[cfg(feature = "semantic")]
pub use ishiki_toolsearch::semantic::Embedder;
