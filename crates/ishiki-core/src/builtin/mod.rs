//! The built-in tools: `read` (READ-*, VIS-*), `search` (TS-1), `codemode` (CM-*),
//! `send_message` (SEND-*), `finish` and `wait` (direct only, CM-4).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use ishiki_codemode::{AttachmentContent as CmContent, CallableTool, Outcome, ToolFailure};
use ishiki_outlet::{Display, DisplayPart, Emitted, Media, MediaRef, Outlet};
use ishiki_projection::Lifetime;
use ishiki_resources::{ArtifactStore, AssetStore, ReadResult, ResourceCenter, WorkspaceScheme};
use ishiki_toolsearch::{Catalog, ToolDef};
use serde_json::{Value, json};

use crate::clock::Clock;
use crate::guard::CallLimits;
use crate::platform::{Dropped, Outgoing, OutgoingImage, Platform, VisionModel};
use crate::profile::Assembly;
use crate::tool::{Tool, ToolContext, ToolError};

/// What the runtime and the built-in tools share.
#[derive(Debug)]
pub(crate) struct SharedParts {
    pub(crate) center: ResourceCenter,
    pub(crate) artifacts: Arc<dyn ArtifactStore>,
    pub(crate) assets: Arc<dyn AssetStore>,
    pub(crate) workspace: Arc<WorkspaceScheme>,
    pub(crate) platform: Arc<dyn Platform>,
    pub(crate) vision: Option<Arc<dyn VisionModel>>,
    pub(crate) vision_target: Option<String>,
    pub(crate) image_input: bool,
    pub(crate) clock: Arc<dyn Clock>,
}

/// [`SharedParts`] plus the catalog and the assembled profile.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) center: ResourceCenter,
    pub(crate) artifacts: Arc<dyn ArtifactStore>,
    pub(crate) assets: Arc<dyn AssetStore>,
    pub(crate) workspace: Arc<WorkspaceScheme>,
    pub(crate) platform: Arc<dyn Platform>,
    pub(crate) vision: Option<Arc<dyn VisionModel>>,
    pub(crate) vision_target: Option<String>,
    pub(crate) image_input: bool,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) assembly: Assembly,
    catalog: Mutex<Catalog>,
    /// Retrieval telemetry: the latest searches of this conversation (query, hit names).
    searches: Mutex<Vec<(String, Vec<String>)>>,
}

/// How many recent searches [`Shared::searches_missing`] looks back on.
const SEARCH_LOG: usize = 64;

impl Shared {
    pub(crate) fn new(parts: SharedParts, catalog: Catalog, assembly: Assembly) -> Self {
        Self {
            center: parts.center,
            artifacts: parts.artifacts,
            assets: parts.assets,
            workspace: parts.workspace,
            platform: parts.platform,
            vision: parts.vision,
            vision_target: parts.vision_target,
            image_input: parts.image_input,
            clock: parts.clock,
            assembly,
            catalog: Mutex::new(catalog),
            searches: Mutex::new(Vec::new()),
        }
    }

    /// Records a search and its hits for retrieval telemetry.
    pub(crate) fn record_search(&self, query: &str, hits: Vec<String>) {
        let mut log = self
            .searches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if log.len() >= SEARCH_LOG {
            log.remove(0);
        }
        log.push((query.to_owned(), hits));
    }

    /// The queries of earlier searches in this conversation that did not return `tool`.
    pub(crate) fn searches_missing(&self, tool: &str) -> Vec<String> {
        let log = self
            .searches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        log.iter()
            .filter(|(_, hits)| !hits.iter().any(|h| h == tool))
            .map(|(q, _)| q.clone())
            .collect()
    }

    pub(crate) fn catalog_mut(&self) -> MutexGuard<'_, Catalog> {
        self.catalog
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The outcome of a direct call: text, attachments with lifetimes, continuation.
#[derive(Debug)]
pub(crate) struct Done {
    pub(crate) text: String,
    pub(crate) attachments: Vec<(MediaRef, Lifetime)>,
    pub(crate) continuation: Option<String>,
}

impl Done {
    /// Pairs the outlet's attachments, in order, with the lifetimes asked for (default once).
    pub(crate) fn from_emitted(emitted: Emitted, lifetimes: &[Lifetime]) -> Self {
        let attachments = emitted
            .attachments
            .into_iter()
            .enumerate()
            .map(|(k, m)| (m, lifetimes.get(k).copied().unwrap_or(Lifetime::Once)))
            .collect();
        Self {
            text: emitted.text,
            attachments,
            continuation: emitted.continuation.map(|c| c.url),
        }
    }
}

/// Tools a codemode program may call: everything but `codemode` itself, `finish` and `wait`
/// (CM-4).
pub(crate) fn callable_from_program(name: &str) -> bool {
    !matches!(name, "codemode" | "finish" | "wait")
}

/// The definition of a built-in tool: always resident, origin `builtin`.
fn builtin_def(name: &str, description: &str, input_schema: Value) -> ToolDef {
    ToolDef {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
        output_schema: None,
        resident: true,
        origin: Some("builtin".to_owned()),
    }
}

fn string_field<'a>(input: &'a Value, key: &str) -> &'a str {
    input.get(key).and_then(Value::as_str).unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// read

/// `read({ url, lifetime? })`: raw result for programs, pages and attachments for direct calls.
#[derive(Debug)]
pub(crate) struct ReadTool {
    shared: Arc<Shared>,
    for_program: bool,
}

impl ReadTool {
    pub(crate) fn new(shared: Arc<Shared>, for_program: bool) -> Self {
        Self {
            shared,
            for_program,
        }
    }
}

/// The raw `read` result as programs see it (RES-7).
pub(crate) fn read_output_schema() -> Value {
    json!({
        "oneOf": [
            {
                "type": "object",
                "description": "Text: the full text of the requested range",
                "properties": {
                    "type": { "const": "text" },
                    "text": { "type": "string" },
                    "source": { "type": "object", "description": "Where the text came from (file schemes)" }
                },
                "required": ["type", "text"]
            },
            {
                "type": "object",
                "description": "Media or binary content",
                "properties": {
                    "type": { "const": "file" },
                    "url": { "type": "string" },
                    "mediaType": { "type": "string" },
                    "data": { "type": "string", "description": "The bytes, base64" }
                },
                "required": ["type", "url", "mediaType", "data"]
            }
        ]
    })
}

/// The `read` input schema: `lifetime` only for direct calls with image input on (READ-2).
pub(crate) fn read_schema(offer_lifetime: bool) -> Value {
    let mut properties = json!({
        "url": {
            "type": "string",
            "description": "Resource URL: workspace:///path, local:///path, artifact://tool/name, asset://<id>. File URLs take ?offset=N (bytes), ?lines=A-B and ?view=numbered. On an image, ?question=... asks the vision model about it."
        }
    });
    if offer_lifetime {
        properties["lifetime"] = json!({
            "type": "string",
            "enum": ["once", "recent", "retain"],
            "description": "How long an image read stays visible: once (default, the next request only), recent (kept among the latest images), retain (while this result stays in context)."
        });
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": ["url"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for ReadTool {
    fn definition(&self) -> ToolDef {
        builtin_def(
            "read",
            "Read a resource by URL: text comes back in pages (follow the [Continue …] line for more), images and audio as attachments.",
            read_schema(self.shared.image_input && !self.for_program),
        )
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let url = string_field(&input, "url");
        if let Some((rest, question)) = split_question(url)? {
            let answer = ask_vision(&self.shared, &rest, &question).await?;
            return Ok(json!({ "type": "text", "text": answer }));
        }
        let result = self.shared.center.read(url).await?;
        serde_json::to_value(result)
            .map_err(|e| ToolError::new(format!("cannot encode the read result: {e}")))
    }
}

/// Splits `?question=` off a URL (VIS-1): only `read` interprets it; other parameters stay.
fn split_question(url: &str) -> Result<Option<(String, String)>, ToolError> {
    if !url.contains("question=") {
        return Ok(None);
    }
    let mut parsed = ishiki_resources::parse_url(url)?;
    let mut question = None;
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter_map(|(k, v)| {
            if k == "question" {
                question = Some(v.into_owned());
                None
            } else {
                Some((k.into_owned(), v.into_owned()))
            }
        })
        .collect();
    let Some(question) = question else {
        return Ok(None);
    };
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok(Some((parsed.to_string(), question)))
}

/// VIS-1..VIS-3: the side model answers; never a fallback to the main model's image input.
async fn ask_vision(shared: &Shared, url: &str, question: &str) -> Result<String, ToolError> {
    if question.trim().is_empty() {
        return Err(ToolError::new(format!(
            "the question for {url} is empty: write what you want to know after ?question="
        )));
    }
    let (Some(vision), Some(target)) = (&shared.vision, &shared.vision_target) else {
        return Err(ToolError::new(
            "no vision model is configured (attachment.visionModel), so ?question= cannot be answered",
        ));
    };
    let result = shared.center.read(url).await?;
    let ReadResult::File {
        media_type, data, ..
    } = result
    else {
        return Err(ToolError::new(format!(
            "{url} is text, not an image: ?question= works on images only"
        )));
    };
    if !media_type.starts_with("image/") {
        return Err(ToolError::new(format!(
            "{url} is {media_type}, not an image: ?question= works on images only"
        )));
    }
    vision
        .ask(target, &media_type, &data, question)
        .await
        .map_err(|reason| ToolError::new(format!("the vision model `{target}` failed: {reason}")))
}

fn parse_lifetime(input: &Value) -> Lifetime {
    match input.get("lifetime").and_then(Value::as_str) {
        Some("recent") => Lifetime::Recent,
        Some("retain") => Lifetime::Retain,
        _ => Lifetime::Once,
    }
}

/// A direct `read`: FileScheme text pages from its own URL (OUT-6), other text through the
/// outlet's budget (OUT-5), media as an attachment (READ-2, READ-3) or, with image input off,
/// a description (READ-4).
pub(crate) async fn read_direct(
    shared: &Shared,
    outlet: &Outlet,
    input: &Value,
) -> Result<Done, ToolError> {
    let url = string_field(input, "url");
    if let Some((rest, question)) = split_question(url)? {
        let answer = ask_vision(shared, &rest, &question).await?;
        let emitted = outlet
            .emit("read", Display::text(answer))
            .map_err(|e| ToolError::new(e.to_string()))?;
        return Ok(Done::from_emitted(emitted, &[]));
    }
    let lifetime = parse_lifetime(input);
    match shared.center.read(url).await? {
        ReadResult::Text {
            text,
            source: Some(source),
        } => Ok(Done::from_emitted(
            outlet.emit_read_text(&text, &source),
            &[],
        )),
        ReadResult::Text { text, source: None } => {
            let emitted = outlet
                .emit("read", Display::text(text))
                .map_err(|e| ToolError::new(e.to_string()))?;
            Ok(Done::from_emitted(emitted, &[]))
        }
        ReadResult::File {
            url: file_url,
            media_type,
            data,
            ..
        } => {
            let is_image = media_type.starts_with("image/");
            let is_audio = media_type.starts_with("audio/");
            if (is_image && !shared.image_input) || !(is_image || is_audio) {
                let info = ishiki_resources::sniff(&data);
                let dims = info
                    .dimensions
                    .map(|(w, h)| format!("; {w}x{h}"))
                    .unwrap_or_default();
                let why = if is_image {
                    let hint = if shared.vision_target.is_some() {
                        format!(
                            " To learn what it shows, read {file_url}?question=<your question>."
                        )
                    } else {
                        String::new()
                    };
                    format!("image input is off for this model, so the image is not shown.{hint}")
                } else {
                    "this media type cannot be shown to the model.".to_owned()
                };
                return Ok(Done {
                    text: format!(
                        "[{file_url}: {media_type}; {} bytes{dims}] {why}",
                        data.len()
                    ),
                    attachments: Vec::new(),
                    continuation: None,
                });
            }
            let display = Display {
                parts: vec![DisplayPart::Media(Media {
                    media_type,
                    data,
                    url: Some(file_url),
                })],
            };
            let emitted = outlet
                .emit("read", display)
                .map_err(|e| ToolError::new(e.to_string()))?;
            Ok(Done::from_emitted(emitted, &[lifetime]))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// search

/// `search({ query })`: discloses deferred tools; hits join the catalog from the next step (TS-2).
#[derive(Debug)]
pub(crate) struct SearchTool {
    shared: Arc<Shared>,
}

impl SearchTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[async_trait]
impl Tool for SearchTool {
    fn definition(&self) -> ToolDef {
        builtin_def(
            "search",
            "Find more tools by what they do. Matching tools become callable from the next step on. `select:NAME` loads a tool by its exact name.",
            json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What the tool should do, or select:NAME" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 20, "description": "At most this many hits (default 5)" }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let query = string_field(&input, "query");
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(5);
        let hits = self.shared.catalog_mut().search(query, limit);
        self.shared
            .record_search(query, hits.iter().map(|h| h.name.clone()).collect());
        Ok(json!({
            "query": query,
            "hits": hits.iter().map(|h| json!({ "name": h.name, "description": h.description, "matched": h.matched })).collect::<Vec<_>>()
        }))
    }

    fn to_model_output(&self, raw: &Value) -> Display {
        let query = string_field(raw, "query");
        let hits = raw
            .get("hits")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if hits.is_empty() {
            return Display::text(format!(
                "No tools match `{query}`. Try other words for what the tool should do."
            ));
        }
        let mut text = format!(
            "{} tool(s) found; callable from the next step on:\n",
            hits.len()
        );
        for hit in &hits {
            text.push_str(&format!(
                "- {}: {}\n",
                string_field(hit, "name"),
                string_field(hit, "description")
            ));
        }
        Display::text(text.trim_end().to_owned())
    }
}

// ---------------------------------------------------------------------------------------------
// codemode

/// `codemode({ code })`: runs a program in the sandbox (CM-1).
#[derive(Debug)]
pub(crate) struct CodemodeTool {
    description: String,
}

impl CodemodeTool {
    /// The description lists the signatures of the tools a program can call now; tools found
    /// later are announced with their signatures by catalog deltas (TS-4).
    pub(crate) fn new(callable: &[ToolDef]) -> Self {
        let mut description = String::from(
            "Run a JavaScript program (the body of an async function: top-level await and return work). \
Call tools as `await tools.name(input)`; they return raw results (read gives { type: \"text\", text } or { type: \"file\", url, mediaType, data /* base64 */ }). \
Only the final return value reaches you; intermediate data stays in the program. Each call starts fresh. \
To show media, return { ..., attachments: [item, ...] } where an item is an MCP image/audio block, a read file node, an embedded resource or { type: \"resource_link\", uri }, optionally with lifetime: \"once\" | \"recent\" | \"retain\".\n\nCallable tools:\n",
        );
        for def in callable {
            let mut def = def.clone();
            if def.name == "read" {
                def.input_schema = read_schema(false);
                def.output_schema = Some(read_output_schema());
            }
            description.push_str(&ishiki_toolsearch::signature(&def));
            description.push('\n');
        }
        Self {
            description: description.trim_end().to_owned(),
        }
    }
}

#[async_trait]
impl Tool for CodemodeTool {
    fn definition(&self) -> ToolDef {
        builtin_def(
            "codemode",
            &self.description,
            json!({
                "type": "object",
                "properties": { "code": { "type": "string", "description": "The program" } },
                "required": ["code"],
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, _input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        // The runtime runs programs itself (it owns the sandbox and the callable set); a program
        // cannot start another program (CM-4 keeps `codemode` out of `tools`).
        Err(ToolError::new(
            "codemode cannot be called from inside a codemode program",
        ))
    }
}

/// A tool as a program sees it: execute only, with `context.from_program` set (CM-2).
#[derive(Debug)]
struct ProgramTool {
    tool: Arc<dyn Tool>,
    name: String,
    input_schema: Value,
    output_schema: Option<Value>,
    context: ToolContext,
    limits: CallLimits,
}

#[async_trait]
impl CallableTool for ProgramTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    fn output_schema(&self) -> Option<&Value> {
        self.output_schema.as_ref()
    }

    async fn call(&self, input: Value) -> Result<Value, ToolFailure> {
        crate::guard::execute(
            self.tool.clone(),
            &self.name,
            input,
            &self.context,
            self.limits,
        )
        .await
        .map_err(|e| ToolFailure::new(e.message()))
    }
}

/// The tools callable from a program now: the available catalog minus `codemode`, `finish`,
/// `wait`; `read` without `lifetime` (READ-2).
pub(crate) fn callable_tools(
    shared: &Arc<Shared>,
    tools: &[(ToolDef, Arc<dyn Tool>)],
    context: &ToolContext,
) -> Vec<Arc<dyn CallableTool>> {
    let available: Vec<String> = shared
        .catalog_mut()
        .available()
        .iter()
        .map(|d| d.name.clone())
        .collect();
    let limits = CallLimits::from_profile(&shared.assembly.profile.tools);
    let mut out: Vec<Arc<dyn CallableTool>> = Vec::new();
    for name in available {
        if !callable_from_program(&name) {
            continue;
        }
        let Some((def, tool)) = tools.iter().find(|(d, _)| d.name == name) else {
            continue;
        };
        let (tool, input_schema): (Arc<dyn Tool>, Value) = if name == "read" {
            (
                Arc::new(ReadTool::new(shared.clone(), true)),
                read_schema(false),
            )
        } else {
            (tool.clone(), def.input_schema.clone())
        };
        let output_schema = if name == "read" {
            Some(read_output_schema())
        } else {
            def.output_schema.clone()
        };
        out.push(Arc::new(ProgramTool {
            tool,
            name,
            input_schema,
            output_schema,
            context: ToolContext {
                from_program: true,
                ..context.clone()
            },
            limits,
        }));
    }
    out
}

fn lifetime_of(l: ishiki_codemode::Lifetime) -> Lifetime {
    match l {
        ishiki_codemode::Lifetime::Once => Lifetime::Once,
        ishiki_codemode::Lifetime::Recent => Lifetime::Recent,
        ishiki_codemode::Lifetime::Retain => Lifetime::Retain,
    }
}

/// The most attachments one program result may declare (issue 13): more is an error, before
/// anything is read.
pub(crate) const MAX_ATTACHMENTS_PER_RESULT: usize = 32;

/// The display of a program's outcome: the returned value as JSON, captured console output,
/// then the declared attachments (CM-5..CM-7). Media returned by tools inside the program is
/// not looked at (CM-6).
///
/// Attachments are bounded like the program: at most [`MAX_ATTACHMENTS_PER_RESULT`], each
/// distinct URL read once, all reads under one deadline (`tools.timeoutMs`), and their bytes
/// together at most `tools.maxResultBytes`.
pub(crate) async fn codemode_display(
    shared: &Shared,
    outcome: Outcome,
    limits: CallLimits,
) -> Result<(Display, Vec<Lifetime>), ToolError> {
    let declared = outcome.attachments.len();
    if declared > MAX_ATTACHMENTS_PER_RESULT {
        return Err(ToolError::new(format!(
            "the program returned {declared} attachments, over the limit of {MAX_ATTACHMENTS_PER_RESULT} per result: return at most {MAX_ATTACHMENTS_PER_RESULT}"
        )));
    }
    let mut text = match &outcome.value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if !outcome.console.is_empty() {
        text.push_str("\n[console]\n");
        text.push_str(&outcome.console.join("\n"));
    }
    // Each distinct URL is read once, all under one deadline.
    let mut urls: Vec<&str> = outcome
        .attachments
        .iter()
        .filter_map(|item| match &item.content {
            CmContent::Reference { url, .. } => Some(url.as_str()),
            _ => None,
        })
        .collect();
    urls.sort_unstable();
    urls.dedup();
    let resolved = crate::guard::with_deadline("codemode", limits, async {
        let mut resolved = HashMap::new();
        for url in urls {
            resolved.insert(url.to_owned(), shared.center.read(url).await);
        }
        Ok(resolved)
    })
    .await
    .map_err(|_| {
        ToolError::new(format!(
            "reading the program's attachments took longer than {} ms (tools.timeoutMs): attach fewer or smaller files",
            limits.timeout.as_millis()
        ))
    })?;
    let mut total: u64 = 0;
    let mut add_bytes = |n: usize| -> Result<(), ToolError> {
        total = total.saturating_add(n as u64);
        if total > limits.max_result_bytes {
            return Err(ToolError::new(format!(
                "the program's attachments are larger than {} bytes together (tools.maxResultBytes): attach fewer or smaller files",
                limits.max_result_bytes
            )));
        }
        Ok(())
    };
    let mut parts = vec![DisplayPart::Text(text)];
    let mut lifetimes = Vec::new();
    for item in outcome.attachments {
        match item.content {
            CmContent::Bytes {
                media_type, data, ..
            } => {
                add_bytes(data.len())?;
                parts.push(DisplayPart::Text("\n".to_owned()));
                parts.push(DisplayPart::Media(Media {
                    media_type,
                    data,
                    url: None,
                }));
                lifetimes.push(lifetime_of(item.lifetime));
            }
            CmContent::Text { uri, text, .. } => {
                add_bytes(text.len())?;
                parts.push(DisplayPart::Text(format!("\n[resource: {uri}]\n{text}")));
            }
            CmContent::Reference { url, .. } => match resolved.get(&url) {
                Some(Ok(ReadResult::File {
                    media_type, data, ..
                })) => {
                    add_bytes(data.len())?;
                    parts.push(DisplayPart::Text("\n".to_owned()));
                    parts.push(DisplayPart::Media(Media {
                        media_type: media_type.clone(),
                        data: data.clone(),
                        url: Some(url),
                    }));
                    lifetimes.push(lifetime_of(item.lifetime));
                }
                Some(Ok(ReadResult::Text { .. })) => parts.push(DisplayPart::Text(format!(
                    "\n[attachment {url} is text, not media: read it instead]"
                ))),
                Some(Err(e)) => parts.push(DisplayPart::Text(format!(
                    "\n[attachment {url} could not be resolved: {e}]"
                ))),
                None => parts.push(DisplayPart::Text(format!(
                    "\n[attachment {url} could not be resolved]"
                ))),
            },
        }
    }
    Ok((Display { parts }, lifetimes))
}

// ---------------------------------------------------------------------------------------------
// send_message

/// `send_message({ messages, mode })` (SEND-1, SEND-2).
#[derive(Debug)]
pub(crate) struct SendMessageTool {
    shared: Arc<Shared>,
}

impl SendMessageTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

const SEND_SCHEMES: [&str; 4] = ["asset", "artifact", "local", "workspace"];

/// The most images one `send_message` call sends; later `<img>` tags are dropped unread.
pub(crate) const MAX_SEND_IMAGES: usize = 16;

/// The most image bytes one `send_message` call sends together.
pub(crate) const MAX_SEND_IMAGE_BYTES: usize = 64 << 20;

#[async_trait]
impl Tool for SendMessageTool {
    fn definition(&self) -> ToolDef {
        builtin_def(
            "send_message",
            "Send messages to the user. In element mode, images go inline as <img src=\"URL\"/> with an asset://, artifact://, local:// or workspace:// URL; an image that cannot be sent is removed and reported.",
            json!({
                "type": "object",
                "properties": {
                    "messages": { "type": "array", "items": { "type": "string" }, "minItems": 1 },
                    "mode": { "type": "string", "enum": ["text", "element"], "description": "element: parse <img src=\"…\"/> (default text)" }
                },
                "required": ["messages"],
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, input: Value, context: &ToolContext) -> Result<Value, ToolError> {
        let element = string_field(&input, "mode") == "element";
        let texts: Vec<String> = input
            .get("messages")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut messages = Vec::new();
        let mut images: Vec<OutgoingImage> = Vec::new();
        let mut dropped = Vec::new();
        // Each source is read once per call; the count and the bytes of images are capped.
        let mut resolved: HashMap<String, Result<OutgoingImage, String>> = HashMap::new();
        let mut total_bytes = 0_usize;
        for text in texts {
            if !element {
                messages.push(text);
                continue;
            }
            let mut out = String::new();
            let mut rest = text.as_str();
            while let Some((before, tag, src, after)) = next_img(rest) {
                out.push_str(before);
                rest = after;
                if images.len() >= MAX_SEND_IMAGES {
                    dropped.push(Dropped {
                        src,
                        reason: format!(
                            "over the limit of {MAX_SEND_IMAGES} images per send_message call"
                        ),
                    });
                    continue;
                }
                if !resolved.contains_key(&src) {
                    let image = self.resolve_image(&src).await;
                    resolved.insert(src.clone(), image);
                }
                match resolved.get(&src) {
                    Some(Ok(image))
                        if total_bytes.saturating_add(image.data.len()) > MAX_SEND_IMAGE_BYTES =>
                    {
                        dropped.push(Dropped {
                            src,
                            reason: format!(
                                "the images of this call would pass {MAX_SEND_IMAGE_BYTES} bytes together"
                            ),
                        });
                    }
                    Some(Ok(image)) => {
                        total_bytes += image.data.len();
                        out.push_str(tag);
                        images.push(image.clone());
                    }
                    Some(Err(reason)) => dropped.push(Dropped {
                        src,
                        reason: reason.clone(),
                    }),
                    None => {}
                }
            }
            out.push_str(rest);
            messages.push(out);
        }
        let outgoing = Outgoing {
            step: context.step,
            call_id: context.call_id.clone(),
            messages: messages.clone(),
            images,
            dropped: dropped.clone(),
        };
        self.shared
            .platform
            .send(&outgoing)
            .map_err(|e| ToolError::new(format!("the platform refused the message: {e}")))?;
        Ok(json!({
            "sent": messages.len(),
            "images": outgoing.images.len(),
            "dropped": dropped,
        }))
    }

    fn to_model_output(&self, raw: &Value) -> Display {
        let sent = raw.get("sent").and_then(Value::as_u64).unwrap_or(0);
        let images = raw.get("images").and_then(Value::as_u64).unwrap_or(0);
        let mut text = format!("Sent {sent} message(s) with {images} image(s).");
        if let Some(dropped) = raw.get("dropped").and_then(Value::as_array) {
            for d in dropped {
                text.push_str(&format!(
                    "\nDropped image {}: {}",
                    string_field(d, "src"),
                    string_field(d, "reason")
                ));
            }
        }
        Display::text(text)
    }
}

impl SendMessageTool {
    async fn resolve_image(&self, src: &str) -> Result<OutgoingImage, String> {
        let scheme = src.split_once(':').map(|(s, _)| s).unwrap_or("");
        if !SEND_SCHEMES.contains(&scheme) {
            return Err(format!(
                "`{scheme}:` is not allowed here; use asset://, artifact://, local:// or workspace://"
            ));
        }
        match self.shared.center.read(src).await {
            Ok(ReadResult::File {
                media_type, data, ..
            }) if media_type.starts_with("image/") => Ok(OutgoingImage {
                src: src.to_owned(),
                media_type,
                data,
            }),
            Ok(ReadResult::File { media_type, .. }) => {
                Err(format!("it is {media_type}, not an image"))
            }
            Ok(ReadResult::Text { .. }) => Err("it is text, not an image".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Finds the next `<img … src="…" …/>` (or `>`): text before, the whole tag, the src, the rest.
fn next_img(text: &str) -> Option<(&str, &str, String, &str)> {
    let start = text.find("<img")?;
    let end_rel = text[start..].find('>')?;
    let end = start + end_rel + 1;
    let tag = &text[start..end];
    let src = attribute(tag, "src").unwrap_or_default();
    Some((&text[..start], tag, src, &text[end..]))
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let key = format!("{name}=");
    let at = tag.find(&key)? + key.len();
    let rest = &tag[at..];
    let quote = rest.chars().next()?;
    if quote == '"' || quote == '\'' {
        let inner = &rest[1..];
        let close = inner.find(quote)?;
        Some(inner[..close].to_owned())
    } else {
        let close = rest
            .find(|c: char| c.is_whitespace() || c == '/' || c == '>')
            .unwrap_or(rest.len());
        Some(rest[..close].to_owned())
    }
}

// ---------------------------------------------------------------------------------------------
// finish / wait

/// `finish({ summary? })` and `wait({ reason? })`: the model ends the task or waits for the
/// next message. Direct only (CM-4); they record the model's intent and change nothing else.
#[derive(Debug)]
pub(crate) struct ControlTool {
    name: &'static str,
    description: &'static str,
    /// The one optional text field of the input (`summary` or `reason`).
    field: &'static str,
    /// The flag the raw result sets (`finished` or `waiting`).
    flag: &'static str,
    /// What the model reads back.
    reply: &'static str,
}

impl ControlTool {
    pub(crate) fn finish() -> Self {
        Self {
            name: "finish",
            description: "End the current task. Call it when the user's request is done.",
            field: "summary",
            flag: "finished",
            reply: "Finished.",
        }
    }

    pub(crate) fn wait() -> Self {
        Self {
            name: "wait",
            description: "Wait for the user's next message before going on.",
            field: "reason",
            flag: "waiting",
            reply: "Waiting for the next message.",
        }
    }
}

#[async_trait]
impl Tool for ControlTool {
    fn definition(&self) -> ToolDef {
        builtin_def(
            self.name,
            self.description,
            json!({
                "type": "object",
                "properties": { self.field: { "type": "string" } },
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        Ok(json!({ self.flag: true, self.field: string_field(&input, self.field) }))
    }

    fn to_model_output(&self, _raw: &Value) -> Display {
        Display::text(self.reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send1_img_tags_are_found_with_either_quote() {
        let (before, tag, src, after) =
            next_img("look <img src=\"artifact://codemode/abc.png\"/> ok").expect("a tag");
        assert_eq!(before, "look ");
        assert_eq!(tag, "<img src=\"artifact://codemode/abc.png\"/>");
        assert_eq!(src, "artifact://codemode/abc.png");
        assert_eq!(after, " ok");
        assert_eq!(attribute("<img src='a'>", "src").as_deref(), Some("a"));
        assert_eq!(attribute("<img src=a/>", "src").as_deref(), Some("a"));
    }

    #[test]
    fn vis1_question_is_split_off_and_other_parameters_stay() {
        let (rest, q) = split_question(
            "asset://0190f9f3-3ff8-7000-8000-000000000001?x=1&question=what%20is%20it",
        )
        .expect("valid")
        .expect("has a question");
        assert_eq!(rest, "asset://0190f9f3-3ff8-7000-8000-000000000001?x=1");
        assert_eq!(q, "what is it");
        assert!(
            split_question("workspace:///a.txt")
                .expect("valid")
                .is_none()
        );
    }
}
