//! The Ishiki tool contract: what a tool is to the runtime (`ishiki-core`) and to codemode
//! programs, without the runtime.
//!
//! A [`Tool`] has a [`ToolDef`] (name, description, input and output schemas, resident flag,
//! origin), an async raw [`Tool::execute`] whose JSON result is what a program sees, and a
//! [`Tool::to_model_output`] that turns that result into the [`ToolDisplay`] the outlet budgets for
//! the model. A failure is a [`ToolError`] whose message the model reads and whose
//! [`ToolErrorKind`] the embedder branches on. The runtime validates the input against the
//! input schema before `execute`, runs the call under its deadline, and archives or attaches
//! what the display holds; a tool does none of that itself.
//!
//! This crate is the contract alone (the definition type from `ishiki-toolsearch`, the display
//! type from `ishiki-outlet` and, for the error conversion, resources' synchronous part under
//! it; serde_json, base64 and async-trait), so a crate of tools
//! (`ishiki-mcp`) takes it without the runtime. `ishiki-core` re-exports everything here.
//!
//! ```
//! use async_trait::async_trait;
//! use ishiki_tool::{Tool, ToolContext, ToolDef, ToolError, ToolErrorKind};
//! use serde_json::{Value, json};
//!
//! #[derive(Debug)]
//! struct Add;
//!
//! #[async_trait]
//! impl Tool for Add {
//!     fn definition(&self) -> ToolDef {
//!         ToolDef::new("add", "Adds two integers.", json!({
//!             "type": "object",
//!             "properties": { "a": { "type": "integer" }, "b": { "type": "integer" } },
//!             "required": ["a", "b"]
//!         }))
//!     }
//!
//!     async fn execute(&self, input: Value, _: &ToolContext) -> Result<Value, ToolError> {
//!         let (Some(a), Some(b)) = (input["a"].as_i64(), input["b"].as_i64()) else {
//!             return Err(ToolError::with_kind(ToolErrorKind::Input, "a and b must be integers"));
//!         };
//!         a.checked_add(b)
//!             .map(Value::from)
//!             .ok_or_else(|| ToolError::new("the sum does not fit in 64 bits"))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let context = ToolContext { call_id: "c1".into(), step: 1, from_program: false };
//! let sum = Add.execute(json!({ "a": 2, "b": 3 }), &context).await.unwrap();
//! assert_eq!(sum, json!(5));
//! // The model sees a result that is not a string or a content array as its JSON text.
//! assert_eq!(Add.to_model_output(&sum).parts.len(), 1);
//! # });
//! ```

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
pub use ishiki_outlet::{DisplayPart, Media, ToolDisplay};
pub use ishiki_toolsearch::ToolDef;
use serde_json::Value;

/// Which call a tool runs for: direct calls have their own id; calls from a codemode program
/// carry the id of the outer `codemode` call (attachments belong to it, CM-6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    /// The model's call id.
    pub call_id: String,
    /// The step (model request number) the call belongs to.
    pub step: u64,
    /// True when the call comes from a codemode program rather than directly from the model.
    pub from_program: bool,
}

/// What kind of failure a [`ToolError`] is, for embedders and tools that branch on it. The
/// model reads only the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The tool ran and failed (the kind of [`ToolError::new`]).
    Failed,
    /// The call was refused before or while running because of its input: a malformed call,
    /// an unknown or not yet loaded tool, input the schema rejects, a URL that names nothing.
    /// The model can fix its call.
    Input,
    /// A limit ended the call: its deadline (`tools.timeoutMs`), the result cap
    /// (`tools.maxResultBytes`), a program's attachment or image cap.
    Limit,
    /// What the tool needs is unreachable or overloaded (a server that exited or timed out, a
    /// rate limit): the same call may succeed later.
    Unavailable,
}

/// A tool failure: the message is what the model (or the program) reads; the kind is for the
/// embedder (`ishiki_core::CallReport::error_kind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    kind: ToolErrorKind,
    message: String,
}

impl ToolError {
    /// A failure with a message naming what went wrong (lower-case, no period), of kind
    /// [`ToolErrorKind::Failed`].
    pub fn new(message: impl Into<String>) -> Self {
        Self::with_kind(ToolErrorKind::Failed, message)
    }

    /// A failure of `kind`.
    pub fn with_kind(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ToolErrorKind {
        self.kind
    }

    /// Whether the same call may succeed later ([`ToolErrorKind::Unavailable`]).
    pub fn is_retryable(&self) -> bool {
        self.kind == ToolErrorKind::Unavailable
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<ishiki_resources::ResourceError> for ToolError {
    /// A URL that names nothing (or nothing allowed) is the call's input; a resource over the
    /// handler's limit is a limit; the rest is a failure.
    fn from(e: ishiki_resources::ResourceError) -> Self {
        use ishiki_resources::ResourceErrorKind as R;
        let kind = match e.kind() {
            R::InvalidUrl
            | R::UnknownScheme
            | R::InvalidParameter
            | R::Escape
            | R::NotFound
            | R::NotAllowed => ToolErrorKind::Input,
            R::TooLarge => ToolErrorKind::Limit,
            _ => ToolErrorKind::Failed,
        };
        Self::with_kind(kind, e.message())
    }
}

impl From<ishiki_outlet::OutletError> for ToolError {
    /// The outlet fails only when its artifact store does.
    fn from(e: ishiki_outlet::OutletError) -> Self {
        Self::new(e.to_string())
    }
}

/// A tool the runtime can call directly and from codemode programs.
///
/// `execute` returns the *raw* result (JSON; MCP-style content arrays for media): that is what a
/// program sees (CM-2). `to_model_output` turns it into the display the outlet budgets (OUT-2).
#[async_trait]
pub trait Tool: Send + Sync + fmt::Debug {
    /// Name, description, schemas, resident flag.
    fn definition(&self) -> ToolDef;

    /// Runs the tool; the input has already been validated against the input schema.
    async fn execute(&self, input: Value, context: &ToolContext) -> Result<Value, ToolError>;

    /// The display representation of a raw result for a direct call. The default renders
    /// strings as text, MCP content arrays as text and media parts, anything else as JSON.
    fn to_model_output(&self, raw: &Value) -> ToolDisplay {
        default_display(raw)
    }

    /// What a codemode program calls in this tool's place (CM-2), when programs see it
    /// differently: its definition gives the input and output schemas programs are shown, and
    /// its `execute` runs their calls. The default, `None`, means the tool itself. The built-in
    /// `read` returns its program-side view (no `lifetime`, raw results described by an
    /// output schema).
    fn program_view(&self) -> Option<Arc<dyn Tool>> {
        None
    }

    /// Whether `execute` blocks its thread (synchronous file or network I/O, long CPU work, a
    /// synchronous client). Default `false`: the call is a task on the caller's runtime,
    /// cancelled at its deadline. A blocking tool runs on the blocking pool instead, so it
    /// cannot stall other conversations; past its deadline its thread is abandoned and counted
    /// (`ishiki_core::AbandonedWork`). A tool that blocks without saying so stalls
    /// its runtime's thread, and its deadline cannot interrupt it.
    fn blocking(&self) -> bool {
        false
    }

    /// Whether codemode programs may call this tool at all (CM-4). Default `true`; the
    /// built-ins `codemode` (a program cannot start another), `finish` and `wait` (they end the
    /// model's turn, which only the model does) return `false`.
    fn callable_from_programs(&self) -> bool {
        true
    }
}

/// Tools that can come and go while a conversation runs: the runtime (`ishiki_core::Runtime`)
/// is one. Whatever follows a source whose tool list changes (ishiki-mcp's
/// `apply_tool_changes`) takes a `ToolSet`, so it needs no runtime.
pub trait ToolSet {
    /// Why a tool could not be added (an invalid definition or schema, a name in use).
    type Error: fmt::Display;

    /// Adds `tool`, or replaces the tool of the same name.
    fn add_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), Self::Error>;

    /// Removes the tool `name`; `false` when there is none to remove or the set refuses to
    /// (the runtime keeps its built-in tools).
    fn remove_tool(&mut self, name: &str) -> bool;
}

/// The default display of a raw result (see [`Tool::to_model_output`]).
pub fn default_display(raw: &Value) -> ToolDisplay {
    match raw {
        Value::String(text) => ToolDisplay {
            parts: vec![DisplayPart::Text(text.clone())],
        },
        Value::Array(items) if !items.is_empty() && items.iter().all(is_content_block) => {
            content_display(items)
        }
        other => ToolDisplay {
            parts: vec![DisplayPart::Text(other.to_string())],
        },
    }
}

/// Whether a JSON value is an MCP content block (`text`, `image`, `audio`, `resource`,
/// `resource_link`).
pub fn is_content_block(v: &Value) -> bool {
    let Some(kind) = v.get("type").and_then(Value::as_str) else {
        return false;
    };
    match kind {
        "text" => v.get("text").is_some_and(Value::is_string),
        "image" | "audio" => v.get("data").is_some_and(Value::is_string),
        "resource" => v.get("resource").is_some_and(Value::is_object),
        "resource_link" => v.get("uri").is_some_and(Value::is_string),
        _ => false,
    }
}

fn decode(data: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim().as_bytes())
        .ok()
}

/// MCP content blocks as display parts: text as text, image/audio and blob resources as media,
/// embedded text resources as text, resource links as their URI.
fn content_display(items: &[Value]) -> ToolDisplay {
    let mut parts = Vec::new();
    let push_text = |parts: &mut Vec<DisplayPart>, text: String| {
        if let Some(DisplayPart::Text(previous)) = parts.last_mut() {
            previous.push('\n');
            previous.push_str(&text);
        } else {
            parts.push(DisplayPart::Text(text));
        }
    };
    for item in items {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let str_field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        match kind {
            "text" => push_text(&mut parts, str_field(item, "text").unwrap_or_default()),
            "image" | "audio" => {
                let media_type = str_field(item, "mimeType").unwrap_or_default();
                match str_field(item, "data").as_deref().and_then(decode) {
                    Some(data) => parts.push(DisplayPart::Media(Media {
                        media_type,
                        data,
                        url: None,
                    })),
                    None => push_text(
                        &mut parts,
                        format!("[{kind} block with invalid base64 data ({media_type})]"),
                    ),
                }
            }
            "resource" => {
                let resource = item.get("resource").cloned().unwrap_or(Value::Null);
                let uri = str_field(&resource, "uri").unwrap_or_default();
                if let Some(text) = str_field(&resource, "text") {
                    push_text(&mut parts, text);
                } else if let Some(blob) = str_field(&resource, "blob") {
                    let media_type = str_field(&resource, "mimeType")
                        .unwrap_or_else(|| "application/octet-stream".to_owned());
                    match decode(&blob) {
                        Some(data) => parts.push(DisplayPart::Media(Media {
                            media_type,
                            data,
                            url: None,
                        })),
                        None => push_text(
                            &mut parts,
                            format!("[resource {uri} with invalid base64 blob]"),
                        ),
                    }
                } else {
                    push_text(&mut parts, format!("[resource: {uri}]"));
                }
            }
            "resource_link" => push_text(
                &mut parts,
                format!("[resource: {}]", str_field(item, "uri").unwrap_or_default()),
            ),
            _ => push_text(&mut parts, item.to_string()),
        }
    }
    ToolDisplay { parts }
}
