//! The scenario file (docs/scenario-format.md, format v1): serde types, loading, and the checks that make
//! a malformed scenario fail before anything runs, with a message naming the field and where
//! it is.
//!
//! Loading does everything that depends only on the file: YAML shape (unknown fields and
//! wrong types are errors), `version: 1`, tool entries (loading `definitions` files relative to
//! the scenario), ids (unique; `withdraw`, `$continue` and `${…}` only name ids of earlier
//! steps), and every fixture's bytes (files and the images of `user` steps). What depends on a
//! run — the events a reference walks into, the profile and models assembly — is checked by
//! the runner.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_saphyr::Spanned;

use crate::clock::parse_duration;
use crate::interpolate::Interpolator;

mod check;
mod diagnostic;
mod load;
#[cfg(test)]
mod tests;

pub use diagnostic::{ScenarioError, ScenarioErrorKind};
pub use load::{load, parse};

// The file and IMAGE shapes are part of the scenario format; they live beside their generator.
pub use crate::fixtures::{FileSpec, ImageFormat, ImageSpec, LinesSpec};

/// The format version this runner reads.
pub const VERSION: u32 = 1;

/// A loaded, checked scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// `name`.
    pub name: String,
    /// `profile`, a profile document as in requirements §1 (`{}` when absent); the runtime assembles
    /// it and reports its errors.
    pub profile: Value,
    /// `models`, a models.yaml document, likewise left to the runtime.
    pub models: Value,
    /// `main_model`.
    pub main_model: String,
    /// `workspace` files, sorted by path, with their bytes.
    pub workspace: Vec<FixtureFile>,
    /// `local` files, sorted by path, with their bytes.
    pub local: Vec<FixtureFile>,
    /// `tools`, `definitions` files expanded in place.
    pub tools: Vec<ToolSpec>,
    /// `vision`: the scripted vision model's answers, in order.
    pub vision: Vec<VisionAnswer>,
    /// `compaction`: the scripted answers to compaction requests, in order, of the same shape
    /// (`{ reply: SUMMARY }` or `{ fail: REASON }`).
    pub compaction: Vec<VisionAnswer>,
    /// `steps`, in file order.
    pub steps: Vec<Step>,
    /// The directory relative paths in the scenario are resolved against.
    pub base_dir: PathBuf,
    interpolator: Interpolator,
}

impl Scenario {
    /// The interpolator for this scenario's ids, to resolve `${…}` in steps at run time.
    pub fn interpolator(&self) -> &Interpolator {
        &self.interpolator
    }

    /// How many `model` steps (model requests) the scenario has.
    pub fn model_steps(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Model(_)))
            .count()
    }
}

/// A file to create before the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureFile {
    /// The path as written (`/home/workspace/notes.txt`).
    pub path: String,
    /// The spec it was generated from.
    pub spec: FileSpec,
    /// Its contents.
    pub bytes: Vec<u8>,
}

/// One entry of `tools`.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolSpec {
    /// `{ name, resident? }`: a fixture tool.
    Fixture {
        /// Which one.
        tool: FixtureTool,
        /// Whether it is in the direct catalog from the start.
        resident: bool,
    },
    /// `{ define: …, resident? }`, or one item of a `definitions` file: a declared tool whose
    /// execute returns `{"tool": NAME, "input": INPUT}`.
    Declared {
        /// The declaration.
        definition: ToolDefinition,
        /// Whether it is in the direct catalog from the start.
        resident: bool,
    },
}

/// The fixture tools the runner provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FixtureTool {
    /// `{ path, content }` → `{ ok: true, url }`.
    WriteFile,
    /// `{ value }` → `value`.
    Echo,
    /// `{ lines, width? }` → a dynamic text.
    LargeText,
    /// `IMAGE` → MCP text and image content.
    Screenshot,
    /// `{ data }` → `{ text: "ocr: <bytes> bytes" }`.
    Ocr,
    /// `{ message }` → a tool error.
    Fail,
}

impl FixtureTool {
    /// The tool's name.
    pub fn as_str(self) -> &'static str {
        match self {
            FixtureTool::WriteFile => "write_file",
            FixtureTool::Echo => "echo",
            FixtureTool::LargeText => "large_text",
            FixtureTool::Screenshot => "screenshot",
            FixtureTool::Ocr => "ocr",
            FixtureTool::Fail => "fail",
        }
    }
}

/// A declared tool: `{ name, description, input_schema, output_schema? }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    /// Tool name.
    pub name: String,
    /// Tool description.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Value,
    /// JSON Schema of the output, if declared.
    #[serde(default)]
    pub output_schema: Option<Value>,
}

/// One scripted answer of the vision model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum VisionAnswer {
    /// `{ reply: TEXT }`.
    Reply(String),
    /// `{ fail: REASON }`: the vision request fails.
    Fail(String),
}

/// One step.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// A platform message arrives.
    User(UserStep),
    /// One model request and its scripted response.
    Model(ModelStep),
    /// The platform message with this id is withdrawn.
    Withdraw(String),
    /// Drop all in-memory state and rebuild from the state directory.
    Restart(Empty),
    /// Advance the fake clock.
    Clock(ClockStep),
    /// Run one asset-cleanup pass.
    Cleanup(Empty),
}

/// `{}`: a step without parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `user: { id, text?, images?, chat? }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserStep {
    /// The message id later steps refer to (`m1`).
    pub id: String,
    /// The message text.
    #[serde(default)]
    pub text: Option<String>,
    /// The images the message carries.
    #[serde(default)]
    pub images: Vec<ImageSpec>,
    /// Where it was sent; `private` when absent.
    #[serde(default)]
    pub chat: Chat,
    /// The bytes of `images`, in order, generated at load.
    #[serde(skip)]
    pub image_bytes: Vec<Vec<u8>>,
}

/// The kind of chat a user message comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Chat {
    /// A one-to-one chat.
    #[default]
    Private,
    /// A group chat.
    Group,
}

/// `model: { calls?, text?, fail?, abort? }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelStep {
    /// Tool calls of the response.
    #[serde(default)]
    pub calls: Vec<ModelCall>,
    /// Text of the response (or text-protocol tool calls for `toolCalling: text`).
    #[serde(default)]
    pub text: Option<String>,
    /// The model call fails with this reason: the request is printed, nothing persisted.
    #[serde(default)]
    pub fail: Option<String>,
    /// The response is received but the step is aborted before commit.
    #[serde(default)]
    pub abort: bool,
}

/// `{ id, name, input }`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelCall {
    /// The call id later steps refer to (`c1`).
    pub id: String,
    /// The tool called.
    pub name: String,
    /// The input, possibly `{ $continue: ID }` or holding `${…}` references; `{}` when absent.
    #[serde(default = "empty_object")]
    pub input: Value,
}

/// `clock: { advance }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockStep {
    /// How far to move the clock (`"31d"`: s, m, h, d).
    #[serde(deserialize_with = "de_duration")]
    pub advance: Duration,
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map_err(serde::de::Error::custom)
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The file as written, before checks.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    version: Spanned<u32>,
    name: String,
    #[serde(default = "empty_object")]
    profile: Value,
    models: Value,
    main_model: String,
    #[serde(default)]
    workspace: BTreeMap<String, Spanned<FileSpec>>,
    #[serde(default)]
    local: BTreeMap<String, Spanned<FileSpec>>,
    #[serde(default)]
    tools: Vec<Spanned<RawTool>>,
    #[serde(default)]
    vision: Vec<VisionAnswer>,
    #[serde(default)]
    compaction: Vec<VisionAnswer>,
    steps: Vec<Spanned<Step>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    #[serde(default)]
    name: Option<FixtureTool>,
    #[serde(default)]
    define: Option<ToolDefinition>,
    #[serde(default)]
    definitions: Option<String>,
    #[serde(default)]
    resident: bool,
}
