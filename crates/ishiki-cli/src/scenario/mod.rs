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
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_saphyr::{Location, Spanned};

use crate::clock::parse_duration;
use crate::fixtures;
use crate::interpolate::{self, Interpolator};

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

/// What kind of problem a scenario has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScenarioErrorKind {
    /// The file cannot be read.
    Io,
    /// Malformed YAML, an unknown field, a wrong type, a missing field.
    Yaml,
    /// Well-formed but wrong: version, ids, references, tool entries.
    Invalid,
    /// A `definitions` file cannot be read or is not a list of tool definitions.
    Definitions,
    /// A file or image spec cannot be generated.
    Fixture,
}

/// A scenario that cannot run. The CLI prints it and exits with status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    kind: ScenarioErrorKind,
    path: Option<String>,
    location: Option<(u64, u64)>,
    summary: String,
    rendered: String,
}

impl ScenarioError {
    /// What kind of problem.
    pub fn kind(&self) -> ScenarioErrorKind {
        self.kind
    }

    /// The field path (`steps[2].model.calls[0].input`), when the problem has one.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// Line and column (1-based), when known.
    pub fn location(&self) -> Option<(u64, u64)> {
        self.location
    }

    /// The one-line message, without the source snippet.
    pub fn summary(&self) -> &str {
        &self.summary
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl std::error::Error for ScenarioError {}

/// The source text and its name, to point errors at.
struct Source<'a> {
    text: &'a str,
    name: &'a str,
}

impl Source<'_> {
    /// An error at `path`, located at `at` when known, with a snippet of that line.
    fn error(
        &self,
        kind: ScenarioErrorKind,
        path: &str,
        at: Option<Location>,
        message: &str,
    ) -> ScenarioError {
        let location = at
            .filter(|l| l.line() > 0)
            .map(|l| (l.line(), l.column().max(1)));
        let mut summary = if path.is_empty() {
            message.to_owned()
        } else {
            format!("{path}: {message}")
        };
        let mut rendered = String::new();
        if let Some((line, column)) = location {
            summary.push_str(&format!(" at line {line}, column {column}"));
            rendered = self.snippet(line, column);
        }
        ScenarioError {
            kind,
            path: (!path.is_empty()).then(|| path.to_owned()),
            location,
            rendered: format!("{summary}{rendered}"),
            summary,
        }
    }

    /// ` --> name:line:col` and the line with a caret, in the style serde-saphyr uses.
    fn snippet(&self, line: u64, column: u64) -> String {
        let Some(text) = usize::try_from(line - 1)
            .ok()
            .and_then(|i| self.text.lines().nth(i))
        else {
            return format!("\n --> {}:{line}:{column}", self.name);
        };
        let gutter = " ".repeat(line.to_string().len());
        let caret_at: usize = text
            .chars()
            .take(usize::try_from(column - 1).unwrap_or(0))
            .map(|_| 1)
            .sum();
        format!(
            "\n{gutter}--> {}:{line}:{column}\n{gutter} |\n{line} | {text}\n{gutter} | {}^",
            self.name,
            " ".repeat(caret_at)
        )
    }
}

/// Reads and checks the scenario at `path`; relative paths inside it resolve against its
/// directory.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        kind: ScenarioErrorKind::Io,
        path: None,
        location: None,
        summary: format!("cannot read {name}: {e}"),
        rendered: format!("cannot read {name}: {e}"),
    })?;
    let base_dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    parse_named(&text, &base_dir, &name)
}

/// Parses and checks scenario text; `base_dir` is where `definitions` paths resolve.
pub fn parse(text: &str, base_dir: &Path) -> Result<Scenario, ScenarioError> {
    parse_named(text, base_dir, "<scenario>")
}

fn parse_named(text: &str, base_dir: &Path, name: &str) -> Result<Scenario, ScenarioError> {
    let src = Source { text, name };
    let raw = deserialize(&src)?;
    if raw.version.value != VERSION {
        return Err(src.error(
            ScenarioErrorKind::Invalid,
            "version",
            Some(raw.version.referenced),
            &format!(
                "unsupported scenario version {} (this runner reads version {VERSION})",
                raw.version.value
            ),
        ));
    }
    let tools = resolve_tools(&src, raw.tools, base_dir)?;
    let ids = check_steps(&src, &raw.steps)?;
    let workspace = generate_files(&src, "workspace", raw.workspace)?;
    let local = generate_files(&src, "local", raw.local)?;
    let mut steps = Vec::with_capacity(raw.steps.len());
    for (i, spanned) in raw.steps.into_iter().enumerate() {
        let mut step = spanned.value;
        if let Step::User(user) = &mut step {
            for (j, image) in user.images.iter().enumerate() {
                let bytes = fixtures::image_bytes(image).map_err(|e| {
                    src.error(
                        ScenarioErrorKind::Fixture,
                        &format!("steps[{i}].user.images[{j}].{}", e.field()),
                        Some(spanned.referenced),
                        e.message(),
                    )
                })?;
                user.image_bytes.push(bytes);
            }
        }
        steps.push(step);
    }
    Ok(Scenario {
        name: raw.name,
        profile: raw.profile,
        models: raw.models,
        main_model: raw.main_model,
        workspace,
        local,
        tools,
        vision: raw.vision,
        steps,
        base_dir: base_dir.to_path_buf(),
        interpolator: Interpolator::new(ids.into_keys()),
    })
}

/// Deserializes with the path of the failing field tracked alongside serde-saphyr's location.
fn deserialize(src: &Source<'_>) -> Result<RawScenario, ScenarioError> {
    let mut failed_at = None;
    let mut options = serde_saphyr::Options::default();
    // YAML 1.2 booleans only: `y`, `no`, `on` in a tool input or message stay strings.
    options.strict_booleans = true;
    let result = serde_saphyr::with_deserializer_from_str_with_options(src.text, options, |de| {
        serde_path_to_error::deserialize::<_, RawScenario>(de).map_err(|e| {
            failed_at = Some(render_path(e.path()));
            e.into_inner()
        })
    });
    result.map_err(|e| {
        let path = failed_at.unwrap_or_default();
        let budget = ishiki_core::yaml_budget_message(&e);
        let plain = budget
            .clone()
            .unwrap_or_else(|| e.without_snippet().to_string());
        let summary = if path.is_empty() {
            plain
        } else {
            format!("{path}: {plain}")
        };
        let mut options = serde_saphyr::RenderOptions::default();
        options.source_name = Some(src.name);
        let full = e.render_with_options(options);
        // serde-saphyr's first line repeats the message; ours names the field instead.
        let snippet = full.split_once('\n').map(|(_, rest)| rest).unwrap_or("");
        // The caret line repeats serde-saphyr's own text, which for a budget is a debug dump.
        let snippet = match &budget {
            Some(message) => snippet
                .lines()
                .map(|line| match line.find("budget breached: ") {
                    Some(at) => format!("{}{message}", &line[..at]),
                    None => line.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            None => snippet.to_owned(),
        };
        let rendered = if snippet.is_empty() {
            summary.clone()
        } else {
            format!("{summary}\n{}", snippet.trim_end())
        };
        ScenarioError {
            kind: ScenarioErrorKind::Yaml,
            path: (!path.is_empty()).then_some(path),
            location: e.location().map(|l| (l.line(), l.column())),
            summary,
            rendered,
        }
    })
}

/// A serde path as the scenario reads: `steps[0].user.images[1].height`,
/// `workspace["/home/workspace/a.txt"].image`. The `value` segments `Spanned` wrappers add
/// (the top-level `version`, items of `steps`/`tools`, files of `workspace`/`local`) are
/// dropped: no scenario field is called `value` there.
fn render_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let mut out = String::new();
    for (i, seg) in segments.iter().enumerate() {
        let spanned_wrapper = match (segments.first(), i) {
            (Some(Segment::Map { key: first }), 1) => first == "version",
            (Some(Segment::Map { key: first }), 2) => {
                matches!(first.as_str(), "steps" | "tools" | "workspace" | "local")
            }
            _ => false,
        };
        match seg {
            Segment::Map { key } if spanned_wrapper && key == "value" => {}
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => push_key(&mut out, key),
            Segment::Enum { variant } => push_key(&mut out, variant),
            Segment::Unknown => {}
        }
    }
    out
}

fn push_key(out: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$');
    if plain {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
    } else {
        out.push_str(&format!("[{}]", Value::String(key.to_owned())));
    }
}

fn file_path(section: &str, key: &str) -> String {
    let mut out = section.to_owned();
    push_key(&mut out, key);
    out
}

fn generate_files(
    src: &Source<'_>,
    section: &str,
    files: BTreeMap<String, Spanned<FileSpec>>,
) -> Result<Vec<FixtureFile>, ScenarioError> {
    files
        .into_iter()
        .map(|(path, spec)| {
            let bytes = fixtures::file_bytes(&spec.value).map_err(|e| {
                src.error(
                    ScenarioErrorKind::Fixture,
                    &format!("{}.{}", file_path(section, &path), e.field()),
                    Some(spec.referenced),
                    e.message(),
                )
            })?;
            Ok(FixtureFile {
                path,
                spec: spec.value,
                bytes,
            })
        })
        .collect()
}

fn resolve_tools(
    src: &Source<'_>,
    raw: Vec<Spanned<RawTool>>,
    base_dir: &Path,
) -> Result<Vec<ToolSpec>, ScenarioError> {
    let mut tools = Vec::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let at = Some(entry.referenced);
        let RawTool {
            name,
            define,
            definitions,
            resident,
        } = entry.value;
        let given: Vec<&str> = [
            name.is_some().then_some("`name`"),
            define.is_some().then_some("`define`"),
            definitions.is_some().then_some("`definitions`"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let path = format!("tools[{i}]");
        if given.len() != 1 {
            let message = if given.is_empty() {
                "a tool entry needs one of `name` (a fixture tool), `define` or `definitions`"
                    .to_owned()
            } else {
                format!("{} cannot be combined in one entry", given.join(" and "))
            };
            return Err(src.error(ScenarioErrorKind::Invalid, &path, at, &message));
        }
        if let Some(tool) = name {
            tools.push(ToolSpec::Fixture { tool, resident });
        } else if let Some(definition) = define {
            tools.push(ToolSpec::Declared {
                definition,
                resident,
            });
        } else if let Some(file) = definitions {
            let loaded = load_definitions(&base_dir.join(&file), &file).map_err(|message| {
                src.error(
                    ScenarioErrorKind::Definitions,
                    &format!("{path}.definitions"),
                    at,
                    &message,
                )
            })?;
            tools.extend(loaded.into_iter().map(|definition| ToolSpec::Declared {
                definition,
                resident,
            }));
        }
    }
    Ok(tools)
}

fn load_definitions(path: &Path, written: &str) -> Result<Vec<ToolDefinition>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {written} ({}): {e}", path.display()))?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize::<_, Vec<ToolDefinition>>(&mut de).map_err(|e| {
        let inner = render_path(e.path());
        let at = if inner.is_empty() {
            String::new()
        } else {
            format!("{inner}: ")
        };
        format!(
            "{written} is not a JSON list of tool definitions: {at}{}",
            e.into_inner()
        )
    })
}

/// Where an id is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdKind {
    Call,
    Message,
}

#[derive(Debug, Clone)]
struct IdDef {
    kind: IdKind,
    step: usize,
    path: String,
}

/// Fields of a `tool_result` event a reference to a call may walk into.
const RESULT_FIELDS: [&str; 8] = [
    "event",
    "step",
    "call_id",
    "name",
    "is_error",
    "text",
    "attachments",
    "continue",
];

/// Fields of an `inbound` event a reference to a message may walk into.
const INBOUND_FIELDS: [&str; 3] = ["event", "id", "images"];

/// Checks ids and every reference; returns the ids.
fn check_steps(
    src: &Source<'_>,
    steps: &[Spanned<Step>],
) -> Result<BTreeMap<String, IdDef>, ScenarioError> {
    let invalid = |path: &str, at: Location, message: &str| {
        src.error(ScenarioErrorKind::Invalid, path, Some(at), message)
    };
    let mut ids: BTreeMap<String, IdDef> = BTreeMap::new();
    for (i, step) in steps.iter().enumerate() {
        let mut defined = Vec::new();
        match &step.value {
            Step::User(user) => defined.push((
                user.id.clone(),
                IdKind::Message,
                format!("steps[{i}].user.id"),
            )),
            Step::Model(model) => {
                for (j, call) in model.calls.iter().enumerate() {
                    defined.push((
                        call.id.clone(),
                        IdKind::Call,
                        format!("steps[{i}].model.calls[{j}].id"),
                    ));
                }
            }
            Step::Withdraw(_) | Step::Restart(_) | Step::Clock(_) | Step::Cleanup(_) => {}
        }
        for (id, kind, path) in defined {
            if let Some(first) = ids.get(&id) {
                return Err(invalid(
                    &path,
                    step.referenced,
                    &format!("id {id} is already used by {}", first.path),
                ));
            }
            ids.insert(
                id,
                IdDef {
                    kind,
                    step: i,
                    path,
                },
            );
        }
    }
    let interpolator = Interpolator::new(ids.keys().cloned());
    for (i, step) in steps.iter().enumerate() {
        let at = step.referenced;
        let check_refs = |path: &str, text: &str| -> Result<(), ScenarioError> {
            let refs = interpolator
                .references(text)
                .map_err(|e| invalid(path, at, &e.to_string()))?;
            for r in refs {
                let problem = match ids.get(&r.id) {
                    None => Some(format!(
                        "no call or user message has id {} (a reference names an earlier call or user message)",
                        r.id
                    )),
                    Some(def) if def.step >= i => Some(format!(
                        "{} is defined at {}; a step may only refer to earlier steps",
                        r.id, def.path
                    )),
                    Some(def) => {
                        let (what, fields): (&str, &[&str]) = match def.kind {
                            IdKind::Call => ("the tool_result of call", &RESULT_FIELDS),
                            IdKind::Message => ("the inbound event of message", &INBOUND_FIELDS),
                        };
                        match r.path.first() {
                            Some(f) if fields.contains(&f.as_str()) => None,
                            _ => Some(format!(
                                "{what} {} has the fields {}",
                                r.id,
                                fields.join(", ")
                            )),
                        }
                    }
                };
                if let Some(problem) = problem {
                    return Err(invalid(
                        path,
                        at,
                        &format!("bad reference `{}`: {problem}", r.text),
                    ));
                }
            }
            Ok(())
        };
        match &step.value {
            Step::User(user) => {
                if let Some(text) = &user.text {
                    check_refs(&format!("steps[{i}].user.text"), text)?;
                }
            }
            Step::Model(model) => {
                let base = format!("steps[{i}].model");
                if model.fail.is_some()
                    && (!model.calls.is_empty() || model.text.is_some() || model.abort)
                {
                    return Err(invalid(
                        &format!("{base}.fail"),
                        at,
                        "a failing model step has no response: `fail` cannot be combined with `calls`, `text` or `abort`",
                    ));
                }
                for (field, text) in [("text", &model.text), ("fail", &model.fail)] {
                    if let Some(text) = text {
                        check_refs(&format!("{base}.{field}"), text)?;
                    }
                }
                for (j, call) in model.calls.iter().enumerate() {
                    let call_path = format!("{base}.calls[{j}]");
                    check_refs(&format!("{call_path}.name"), &call.name)?;
                    let input_path = format!("{call_path}.input");
                    let target = interpolate::continue_target(&call.input)
                        .map_err(|e| invalid(&input_path, at, &e.to_string()))?;
                    match target {
                        Some(target) => match ids.get(target) {
                            Some(def) if def.kind == IdKind::Call && def.step < i => {}
                            found => {
                                let what = match found {
                                    None => format!("unknown call id {target}"),
                                    Some(def) if def.kind == IdKind::Message => {
                                        format!("{target}, a user message")
                                    }
                                    Some(def) => format!("{target}, defined at {}", def.path),
                                };
                                return Err(invalid(
                                    &format!("{input_path}.$continue"),
                                    at,
                                    &format!(
                                        "`$continue` names {what}; it must name a call of an earlier step"
                                    ),
                                ));
                            }
                        },
                        None => {
                            let mut strings = Vec::new();
                            collect_strings(&call.input, input_path, &mut strings);
                            for (path, text) in strings {
                                check_refs(&path, text)?;
                            }
                        }
                    }
                }
            }
            Step::Withdraw(id) => match ids.get(id) {
                Some(def) if def.kind == IdKind::Message && def.step < i => {}
                _ => {
                    return Err(invalid(
                        &format!("steps[{i}].withdraw"),
                        at,
                        &format!("no earlier user step has message id {id}"),
                    ));
                }
            },
            Step::Restart(_) | Step::Clock(_) | Step::Cleanup(_) => {}
        }
    }
    Ok(ids)
}

/// Every string inside a JSON value, with its path.
fn collect_strings<'v>(value: &'v Value, path: String, out: &mut Vec<(String, &'v str)>) {
    match value {
        Value::String(s) => out.push((path, s)),
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_strings(v, format!("{path}[{i}]"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let mut p = path.clone();
                push_key(&mut p, k);
                collect_strings(v, p, out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const HEAD: &str =
        "version: 1\nname: t\nmodels: { models: { main: { input: [text] } } }\nmain_model: main\n";

    fn ok(body: &str) -> Scenario {
        match parse(&format!("{HEAD}{body}"), Path::new(".")) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    fn err(body: &str) -> ScenarioError {
        match parse(&format!("{HEAD}{body}"), Path::new(".")) {
            Ok(_) => panic!("parsed:\n{body}"),
            Err(e) => e,
        }
    }

    /// The directories holding the public scenarios: the repo's `examples/` once the lead
    /// copies them there, and the shared folder beside the checkout.
    fn scenario_dirs() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        [
            root.join("../../examples"),
            root.join("../../../shared/scenarios"),
        ]
        .into_iter()
        .filter(|d| d.is_dir())
        .collect()
    }

    #[test]
    fn public_scenarios_load() {
        let dirs = scenario_dirs();
        assert!(
            !dirs.is_empty(),
            "neither examples/ nor ../shared/scenarios/ exists"
        );
        let mut seen = Vec::new();
        for dir in dirs {
            let mut files: Vec<PathBuf> = fs::read_dir(&dir)
                .expect("readable")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect();
            files.sort();
            for f in files {
                let s = match load(&f) {
                    Ok(s) => s,
                    Err(e) => panic!("{}: {e}", f.display()),
                };
                seen.push(s.name.clone());
            }
        }
        for name in ["todo-journey", "recent-pruning", "continue-paging"] {
            assert!(
                seen.iter().any(|s| s == name),
                "{name} not found in {seen:?}"
            );
        }
    }

    #[test]
    fn todo_journey_reads_as_written() {
        let dir = scenario_dirs()
            .into_iter()
            .find(|d| d.join("todo-journey.yaml").exists());
        let s = load(&dir.expect("a scenario dir").join("todo-journey.yaml")).expect("loads");
        assert_eq!(s.main_model, "main");
        assert_eq!(s.profile["codemode"]["enable"], true);
        assert_eq!(s.models["models"]["main"]["toolCalling"], "native");
        assert_eq!(s.workspace.len(), 1);
        assert_eq!(s.workspace[0].path, "/home/workspace/notes.txt");
        assert!(s.workspace[0].bytes.starts_with(b"TODO: buy milk\n"));
        assert_eq!(
            s.tools,
            vec![ToolSpec::Fixture {
                tool: FixtureTool::WriteFile,
                resident: false
            }]
        );
        assert_eq!(s.steps.len(), 5);
        assert_eq!(s.model_steps(), 4);
        let Step::Model(m) = &s.steps[2] else {
            panic!("step 2 is a model step")
        };
        assert_eq!(m.calls[0].name, "codemode");
        assert!(
            m.calls[0].input["code"]
                .as_str()
                .expect("code")
                .contains("tools.write_file")
        );
    }

    #[test]
    fn every_field_of_the_format_parses() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join("catalog.json"),
            r#"[{"name": "a", "description": "A", "input_schema": {"type": "object"}},
                {"name": "b", "description": "B", "input_schema": {}, "output_schema": {"type": "object"}}]"#,
        )
        .expect("write");
        let yaml = format!(
            "{HEAD}{}",
            r#"profile: { attachment: { recentImageCount: 3 } }
workspace:
  /home/workspace/notes.txt: { text: "a\nb\n" }
  /home/workspace/shot.png:  { image: { width: 64, height: 48, format: png } }
  /home/workspace/raw.bin: { base64: "AAEC" }
local:
  /docs/manual.txt: { lines: { count: 3, text: "line {n}" } }
tools:
  - { name: write_file, resident: false }
  - { name: screenshot, resident: true }
  - define:
      name: calendar_create_event
      description: Create an event
      input_schema: { type: object, properties: { title: { type: string } }, required: [title] }
      output_schema: { type: object }
  - { definitions: catalog.json, resident: true }
vision:
  - { reply: "The image says: hello" }
  - { fail: "upstream timeout" }
steps:
  - user: { id: m1, text: "look", images: [ { width: 8, height: 8, format: jpeg }, { width: 9, height: 9, format: webp, bytes: 4000 } ], chat: group }
  - model: { calls: [ { id: c1, name: read, input: { url: "${m1.images.0.url}" } } ] }
  - model: { calls: [ { id: c2, name: read, input: { $continue: c1 } } ], abort: true }
  - model: { text: "see ${c1.continue.url}" }
  - model: { fail: "provider 500" }
  - withdraw: m1
  - restart: {}
  - clock: { advance: "31d" }
  - cleanup: {}
  - model: { calls: [ { id: c3, name: echo, input: { value: [1, "${c2.attachments.0.url}", { k: true }] } } ] }
"#
        );
        let s = parse(&yaml, dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.profile["attachment"]["recentImageCount"], 3);
        let paths: Vec<&str> = s.workspace.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/home/workspace/notes.txt",
                "/home/workspace/raw.bin",
                "/home/workspace/shot.png"
            ]
        );
        assert_eq!(s.workspace[1].bytes, [0, 1, 2]);
        assert!(s.workspace[2].bytes.starts_with(b"\x89PNG"));
        assert_eq!(s.local[0].bytes, b"line 1\nline 2\nline 3\n");
        let names: Vec<(String, bool)> = s
            .tools
            .iter()
            .map(|t| match t {
                ToolSpec::Fixture { tool, resident } => (tool.as_str().to_owned(), *resident),
                ToolSpec::Declared {
                    definition,
                    resident,
                } => (definition.name.clone(), *resident),
            })
            .collect();
        assert_eq!(
            names,
            [
                ("write_file".to_owned(), false),
                ("screenshot".to_owned(), true),
                ("calendar_create_event".to_owned(), false),
                ("a".to_owned(), true),
                ("b".to_owned(), true),
            ]
        );
        assert_eq!(
            s.vision,
            [
                VisionAnswer::Reply("The image says: hello".into()),
                VisionAnswer::Fail("upstream timeout".into())
            ]
        );
        let Step::User(user) = &s.steps[0] else {
            panic!("user step")
        };
        assert_eq!(user.chat, Chat::Group);
        assert_eq!(user.images[1].format, ImageFormat::Webp);
        assert_eq!(user.image_bytes.len(), 2);
        assert_eq!(user.image_bytes[1].len(), 4000);
        assert_eq!(s.steps[5], Step::Withdraw("m1".into()));
        assert_eq!(s.steps[6], Step::Restart(Empty {}));
        assert_eq!(
            s.steps[7],
            Step::Clock(ClockStep {
                advance: Duration::from_secs(31 * 86_400)
            })
        );
        assert_eq!(s.steps[8], Step::Cleanup(Empty {}));
        assert_eq!(s.model_steps(), 5);
        let Step::Model(m) = &s.steps[2] else {
            panic!("model step")
        };
        assert!(m.abort);
        assert_eq!(m.calls[0].input, serde_json::json!({"$continue": "c1"}));
    }

    #[test]
    fn optional_sections_default() {
        let s = ok("steps: []\n");
        assert_eq!(s.profile, serde_json::json!({}));
        assert!(s.workspace.is_empty() && s.tools.is_empty() && s.vision.is_empty());
        let s = ok(
            "steps:\n  - user: { id: m1 }\n  - model: { calls: [ { id: c1, name: finish } ] }\n",
        );
        let Step::User(u) = &s.steps[0] else {
            panic!("user")
        };
        assert_eq!((u.chat, u.text.as_deref()), (Chat::Private, None));
        let Step::Model(m) = &s.steps[1] else {
            panic!("model")
        };
        assert_eq!(m.calls[0].input, serde_json::json!({}));
    }

    #[test]
    fn errors_carry_kind_path_and_location() {
        let e = err("steps:\n  - user: { id: m1, txt: hi }\n");
        assert_eq!(e.kind(), ScenarioErrorKind::Yaml);
        assert_eq!(e.path(), Some("steps[0].user.txt"));
        assert_eq!(e.location(), Some((6, 21)));
        let e = err("steps:\n  - withdraw: m9\n");
        assert_eq!(e.kind(), ScenarioErrorKind::Invalid);
        assert_eq!(e.path(), Some("steps[0].withdraw"));
        assert_eq!(e.location(), Some((6, 5)));
    }

    /// Every kind of malformed scenario, with the message the CLI prints (exit status 2).
    #[test]
    fn scenario_error_messages() {
        let cases: &[(&str, &str)] = &[
            (
                "malformed_yaml",
                "steps:\n  - model: { calls: [ {id: c1, name: r, input: 1 ] }\n",
            ),
            ("unknown_top_level_field", "stepz: []\n"),
            (
                "unknown_step_field",
                "steps:\n  - user: { id: m1, txt: hi }\n",
            ),
            ("unknown_step_kind", "steps:\n  - usr: { id: m1 }\n"),
            (
                "two_step_kinds_in_one_item",
                "steps:\n  - user: { id: m1 }\n    model: {}\n",
            ),
            (
                "wrong_type",
                "steps:\n  - user: { id: m1, images: [ { width: 3, height: x, format: png } ] }\n",
            ),
            ("wrong_type_bool", "steps:\n  - model: { abort: yes }\n"),
            (
                "missing_field",
                "steps:\n  - model: { calls: [ { name: read } ] }\n",
            ),
            ("duplicate_key", "steps: []\nsteps: []\n"),
            (
                "bad_image_format",
                "workspace:\n  /a.bmp: { image: { width: 3, height: 3, format: bmp } }\nsteps: []\n",
            ),
            (
                "bad_file_kind",
                "workspace:\n  /a.txt: { txt: hi }\nsteps: []\n",
            ),
            (
                "image_bytes_too_small",
                "workspace:\n  /home/workspace/shot.png: { image: { width: 32, height: 32, format: png, bytes: 10 } }\nsteps: []\n",
            ),
            (
                "image_zero_width",
                "steps:\n  - user: { id: m1, images: [ { width: 0, height: 3, format: gif } ] }\n",
            ),
            (
                "bad_base64",
                "local:\n  /x.bin: { base64: \"%%%\" }\nsteps: []\n",
            ),
            ("unsupported_version", "steps: []\n"),
            (
                "unknown_fixture_tool",
                "tools:\n  - { name: wrte_file }\nsteps: []\n",
            ),
            (
                "tool_entry_without_kind",
                "tools:\n  - { resident: true }\nsteps: []\n",
            ),
            (
                "tool_entry_with_two_kinds",
                "tools:\n  - { name: echo, definitions: x.json }\nsteps: []\n",
            ),
            (
                "missing_definitions_file",
                "tools:\n  - { definitions: no-such-catalog.json }\nsteps: []\n",
            ),
            (
                "define_missing_description",
                "tools:\n  - define: { name: x, input_schema: {} }\nsteps: []\n",
            ),
            ("bad_duration", "steps:\n  - clock: { advance: 3w }\n"),
            (
                "duplicate_call_id",
                "steps:\n  - model: { calls: [ { id: c1, name: read, input: {} } ] }\n  - model: { calls: [ { id: c1, name: read, input: {} } ] }\n",
            ),
            (
                "call_id_reuses_message_id",
                "steps:\n  - user: { id: m1 }\n  - model: { calls: [ { id: m1, name: read } ] }\n",
            ),
            (
                "withdraw_unknown",
                "steps:\n  - user: { id: m1 }\n  - withdraw: m2\n",
            ),
            (
                "withdraw_before_message",
                "steps:\n  - withdraw: m1\n  - user: { id: m1 }\n",
            ),
            (
                "continue_unknown_call",
                "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: \"x\" } } ] }\n  - model: { calls: [ { id: c2, name: read, input: { $continue: c7 } } ] }\n",
            ),
            (
                "continue_same_step",
                "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: x } }, { id: c2, name: read, input: { $continue: c1 } } ] }\n",
            ),
            (
                "continue_message",
                "steps:\n  - user: { id: m1 }\n  - model: { calls: [ { id: c2, name: read, input: { $continue: m1 } } ] }\n",
            ),
            (
                "continue_with_other_keys",
                "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: x } } ] }\n  - model: { calls: [ { id: c2, name: read, input: { $continue: c1, url: y } } ] }\n",
            ),
            (
                "reference_unknown_id",
                "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: \"${c9.continue.url}\" } } ] }\n",
            ),
            (
                "reference_later_call",
                "steps:\n  - model: { text: \"${c2.continue.url}\" }\n  - model: { calls: [ { id: c2, name: read, input: { url: x } } ] }\n",
            ),
            (
                "reference_bad_field",
                "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: x } } ] }\n  - model: { calls: [ { id: c2, name: read, input: { list: [ \"${c1.contnue.url}\" ] } } ] }\n",
            ),
            (
                "reference_message_field",
                "steps:\n  - user: { id: m1 }\n  - user: { id: m2, text: \"again ${m1.attachments.0.url}\" }\n",
            ),
            (
                "reference_unterminated",
                "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: x } } ] }\n  - model: { text: \"${c1.continue.url\" }\n",
            ),
            (
                "fail_with_calls",
                "steps:\n  - model: { fail: \"500\", calls: [ { id: c1, name: read } ] }\n",
            ),
        ];
        let mut out = String::new();
        for (name, body) in cases {
            let text = if *name == "unsupported_version" {
                format!("version: 2\nname: t\nmodels: {{}}\nmain_model: main\n{body}")
            } else {
                format!("{HEAD}{body}")
            };
            let message = match parse(&text, Path::new("/nonexistent-base")) {
                Ok(_) => panic!("{name} parsed"),
                Err(e) => e.to_string(),
            };
            out.push_str(&format!("## {name}\n{message}\n\n"));
        }
        insta::assert_snapshot!(out);
    }

    #[test]
    fn load_names_the_file_in_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.yaml");
        fs::write(
            &path,
            format!("{HEAD}steps:\n  - user: {{ id: m1, txt: hi }}\n"),
        )
        .expect("write");
        let e = load(&path).expect_err("unknown field");
        assert!(
            e.to_string().contains(&format!("{}:6:21", path.display())),
            "{e}"
        );
        let e = load(&dir.path().join("missing.yaml")).expect_err("missing");
        assert_eq!(e.kind(), ScenarioErrorKind::Io);
    }

    #[test]
    fn definitions_resolve_relative_to_the_scenario() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir(dir.path().join("defs")).expect("mkdir");
        fs::write(
            dir.path().join("defs/catalog.json"),
            r#"[{"name": "x", "description": "X", "input_schema": {}, "extra": 1}]"#,
        )
        .expect("write");
        let path = dir.path().join("s.yaml");
        fs::write(
            &path,
            format!("{HEAD}tools:\n  - {{ definitions: defs/catalog.json }}\nsteps: []\n"),
        )
        .expect("write");
        let e = load(&path).expect_err("extra field");
        assert_eq!(e.kind(), ScenarioErrorKind::Definitions);
        assert!(e.summary().contains("defs/catalog.json is not a JSON list of tool definitions: [0].extra: unknown field `extra`"), "{e}");
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let s = ok(
            "steps:\n  - model: { calls: [ { id: c1, name: echo, input: { value: [y, no, on, true] } } ] }\n",
        );
        let Step::Model(m) = &s.steps[0] else {
            panic!("model")
        };
        assert_eq!(
            m.calls[0].input["value"],
            serde_json::json!(["y", "no", "on", true])
        );
    }

    #[test]
    fn javascript_templates_in_code_are_not_references() {
        let s = ok(
            "steps:\n  - model: { calls: [ { id: c1, name: codemode, input: { code: \"return `${n} items, ${list.length}`\" } } ] }\n",
        );
        assert_eq!(s.model_steps(), 1);
    }
}
