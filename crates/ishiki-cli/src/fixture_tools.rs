//! The scenario runner's fixture tools, dynamic schemes, scripted vision model and platform
//! (docs/scenario-format.md "Fixture tools"). They are real `Tool`s and `SchemeHandler`s: everything below
//! the scripted model runs the production pipeline.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use base64::Engine as _;
use ishiki_core::platform::Outgoing;
use ishiki_core::{
    ModelError, Platform, Tool, ToolContext, ToolDef, ToolError, VisionModel, WorkspaceScheme,
};
use ishiki_resources::{ReadLimit, ReadResult, ResourceError, ResourceErrorKind, SchemeHandler};
use serde_json::{Value, json};
use url::Url;

use crate::fixtures;
use crate::scenario::ImageSpec;

/// The fixture tool names docs/scenario-format.md defines.
pub(crate) const FIXTURE_TOOLS: [&str; 6] = [
    "write_file",
    "echo",
    "large_text",
    "screenshot",
    "ocr",
    "fail",
];

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fixture tool by name.
#[derive(Debug)]
pub(crate) struct FixtureTool {
    name: &'static str,
    resident: bool,
    workspace: Arc<WorkspaceScheme>,
}

/// Builds the fixture tool `name`, or `None` when no fixture has that name.
pub(crate) fn fixture_tool(
    name: &str,
    resident: bool,
    workspace: Arc<WorkspaceScheme>,
) -> Option<FixtureTool> {
    let name = FIXTURE_TOOLS.iter().find(|n| **n == name)?;
    Some(FixtureTool {
        name,
        resident,
        workspace,
    })
}

fn image_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "width": { "type": "integer", "minimum": 1, "maximum": 20000 },
            "height": { "type": "integer", "minimum": 1, "maximum": 20000 },
            "format": { "type": "string", "enum": ["png", "jpeg", "gif", "webp"] },
            "bytes": { "type": "integer", "minimum": 1 },
            "corrupt": { "type": "boolean" }
        },
        "required": ["width", "height", "format"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for FixtureTool {
    /// Synchronous file writes and up to 64 MiB of generated text or image bytes.
    fn blocking(&self) -> bool {
        true
    }

    fn definition(&self) -> ToolDef {
        let (description, input_schema) = match self.name {
            "write_file" => (
                "Write a text file into the workspace (creates or replaces it).",
                json!({
                    "type": "object",
                    "properties": {
                        "path": { "type": "string", "description": "Absolute path in the sandbox, e.g. /home/workspace/notes.txt" },
                        "content": { "type": "string", "description": "The whole new content" }
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
            ),
            "echo" => (
                "Return the given value unchanged.",
                json!({
                    "type": "object",
                    "properties": { "value": { "description": "Any JSON value" } },
                    "required": ["value"],
                    "additionalProperties": false
                }),
            ),
            "large_text" => (
                "Produce a long generated text report of the given number of lines.",
                json!({
                    "type": "object",
                    "properties": {
                        "lines": { "type": "integer", "minimum": 0, "maximum": 10000000 },
                        "width": { "type": "integer", "minimum": 1, "maximum": 100000 }
                    },
                    "required": ["lines"],
                    "additionalProperties": false
                }),
            ),
            "screenshot" => ("Take a screenshot of the screen.", image_schema()),
            "ocr" => (
                "Recognize text in an image given as base64 bytes.",
                json!({
                    "type": "object",
                    "properties": { "data": { "type": "string", "description": "The image bytes, base64" } },
                    "required": ["data"],
                    "additionalProperties": false
                }),
            ),
            _ => (
                "Fail with the given message (for testing error paths).",
                json!({
                    "type": "object",
                    "properties": { "message": { "type": "string" } },
                    "required": ["message"],
                    "additionalProperties": false
                }),
            ),
        };
        ToolDef {
            name: self.name.to_owned(),
            description: description.to_owned(),
            input_schema,
            output_schema: None,
            resident: self.resident,
            origin: Some("fixture".to_owned()),
        }
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let text = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or_default();
        match self.name {
            "write_file" => {
                let url = self
                    .workspace
                    .write(text("path"), text("content").as_bytes())?;
                Ok(json!({ "ok": true, "url": url }))
            }
            "echo" => Ok(input.get("value").cloned().unwrap_or(Value::Null)),
            "large_text" => {
                let lines = input.get("lines").and_then(Value::as_u64).unwrap_or(0);
                let width = input.get("width").and_then(Value::as_u64);
                // Model-controlled sizes: refuse before allocating anything large.
                let size = large_text_size(lines, width);
                if size > LARGE_TEXT_MAX_BYTES {
                    return Err(ToolError::new(format!(
                        "large_text would produce about {size} bytes, over the fixture's limit of {LARGE_TEXT_MAX_BYTES} bytes: ask for fewer lines or a smaller width"
                    )));
                }
                Ok(Value::String(large_text(lines, width)))
            }
            "screenshot" => {
                let spec: ImageSpec = serde_json::from_value(input.clone())
                    .map_err(|e| ToolError::new(format!("invalid screenshot input: {e}")))?;
                let bytes = fixtures::image_bytes(&spec)
                    .map_err(|e| ToolError::new(format!("cannot make the screenshot: {e}")))?;
                let media_type = ishiki_resources::sniff(&bytes).media_type;
                Ok(json!([
                    { "type": "text", "text": format!("screenshot {}x{}", spec.width, spec.height) },
                    { "type": "image", "mimeType": media_type,
                      "data": base64::engine::general_purpose::STANDARD.encode(&bytes) }
                ]))
            }
            "ocr" => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text("data").trim().as_bytes())
                    .map_err(|e| ToolError::new(format!("data is not valid base64: {e}")))?;
                Ok(json!({ "text": format!("ocr: {} bytes", bytes.len()) }))
            }
            _ => Err(ToolError::new(text("message"))),
        }
    }
}

/// The most bytes `large_text` produces for one call.
const LARGE_TEXT_MAX_BYTES: u64 = 64 << 20;

/// An upper bound of the bytes `large_text(lines, width)` produces: each line is at most
/// `max(width, 32)` characters plus its newline.
fn large_text_size(lines: u64, width: Option<u64>) -> u64 {
    let per_line = width.unwrap_or(0).max(32).saturating_add(1);
    lines.saturating_mul(per_line)
}

/// `lines` lines of generated text; with `width`, each line is padded to that many characters.
fn large_text(lines: u64, width: Option<u64>) -> String {
    let mut out = String::new();
    for n in 1..=lines {
        let mut line = format!("report line {n}");
        if let Some(width) = width.and_then(|w| usize::try_from(w).ok()) {
            while line.len() < width {
                line.push('.');
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A `define:` tool: its execute returns `{ "tool": NAME, "input": INPUT }`.
#[derive(Debug)]
pub(crate) struct DeclaredTool {
    def: ToolDef,
}

impl DeclaredTool {
    /// A declared tool from its definition.
    pub(crate) fn new(def: ToolDef) -> Self {
        Self { def }
    }
}

#[async_trait]
impl Tool for DeclaredTool {
    fn definition(&self) -> ToolDef {
        self.def.clone()
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        Ok(json!({ "tool": self.def.name, "input": input }))
    }
}

/// `example://large.text?lines=N` and `example://counter?lines=N`: dynamic, non-file text.
#[derive(Debug, Default)]
pub(crate) struct ExampleScheme {
    reads: Mutex<BTreeMap<String, u64>>,
}

#[async_trait]
impl SchemeHandler for ExampleScheme {
    fn scheme(&self) -> &str {
        "example"
    }

    async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError> {
        self.read_limited(url, ReadLimit::DEFAULT).await
    }

    /// The size follows from `?lines=N`: it is checked before any text is made.
    async fn read_limited(&self, url: &Url, limit: ReadLimit) -> Result<ReadResult, ResourceError> {
        let lines = url
            .query_pairs()
            .find(|(k, _)| k == "lines")
            .and_then(|(_, v)| v.parse::<u64>().ok())
            .ok_or_else(|| {
                ResourceError::new(
                    ResourceErrorKind::InvalidParameter,
                    format!("`{url}` needs ?lines=N (a whole number)"),
                )
            })?;
        let host = url.host_str().unwrap_or_default();
        // A "large text line N" or "read K line N" line is at most 64 bytes.
        limit.check(url, lines.saturating_mul(64))?;
        let text = match host {
            "large.text" => large_text(lines, None).replace("report line", "large text line"),
            "counter" => {
                let k = {
                    let mut reads = lock(&self.reads);
                    let k = reads.entry(url.to_string()).or_insert(0);
                    *k += 1;
                    *k
                };
                let mut out = String::new();
                for n in 1..=lines {
                    out.push_str(&format!("read {k} line {n}\n"));
                }
                out
            }
            other => {
                return Err(ResourceError::new(
                    ResourceErrorKind::NotFound,
                    format!("example://{other} does not exist (try large.text or counter)"),
                ));
            }
        };
        Ok(ReadResult::Text { text, source: None })
    }
}

/// Answers vision questions from the scenario's `vision` list, in order.
#[derive(Debug)]
pub(crate) struct ScriptedVision {
    answers: Mutex<VecDeque<Result<String, String>>>,
}

impl ScriptedVision {
    /// A vision model that gives these answers in order.
    pub(crate) fn new(answers: Vec<Result<String, String>>) -> Self {
        Self {
            answers: Mutex::new(answers.into()),
        }
    }
}

#[async_trait]
impl VisionModel for ScriptedVision {
    async fn ask(
        &self,
        _target: &str,
        _media_type: &str,
        _image: &[u8],
        _question: &str,
    ) -> Result<String, ModelError> {
        lock(&self.answers)
            .pop_front()
            .unwrap_or_else(|| Err("the scenario has no more vision answers".to_owned()))
            .map_err(ModelError::permanent)
    }
}

/// Collects what `send_message` sends, for `sent` events.
#[derive(Debug, Default)]
pub(crate) struct RecordingPlatform {
    sent: Mutex<Vec<Outgoing>>,
}

impl RecordingPlatform {
    /// Takes everything sent since the last call.
    pub(crate) fn drain(&self) -> Vec<Outgoing> {
        std::mem::take(&mut *lock(&self.sent))
    }
}

#[async_trait]
impl Platform for RecordingPlatform {
    async fn send(&self, outgoing: &Outgoing) -> Result<(), ToolError> {
        lock(&self.sent).push(outgoing.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_of_huge_generated_text_ends_with_the_read_limit_not_an_allocation() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let url = Url::parse("example://large.text?lines=18446744073709551615").expect("url");
        let error = runtime
            .block_on(ExampleScheme::default().read_limited(&url, ReadLimit::DEFAULT))
            .expect_err("over the limit");
        assert_eq!(error.kind(), ResourceErrorKind::TooLarge);
        assert_eq!(
            error.to_string(),
            "`example://large.text?lines=18446744073709551615` would be about 18446744073709551615 bytes, over the read limit of 67108864 bytes: ask for less"
        );
    }
}
