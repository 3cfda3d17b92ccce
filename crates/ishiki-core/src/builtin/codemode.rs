//! `codemode` (CM-*): the tool that runs programs, the tools a program may call, and the
//! display of a program's outcome with its declared attachments.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use ishiki_outlet::{DisplayPart, Media, ToolDisplay};
use ishiki_projection::Lifetime;
use ishiki_resources::ReadResult;
use ishiki_tool::{Tool, ToolContext, ToolError, ToolErrorKind};
use ishiki_toolsearch::ToolDef;
use serde_json::{Value, json};

use super::direct::{DirectCall, DirectOutput, DirectTool, MAX_MEDIA_PER_RESULT, ToolLookup};
use super::{Shared, builtin_def};
#[cfg(feature = "codemode")]
use crate::convert::codemode_tool_error;
use crate::guard::CallLimits;
#[cfg(feature = "codemode")]
use ishiki_codemode::AttachmentContent as CmContent;
#[cfg(feature = "codemode")]
use ishiki_codemode::CallableTool;
#[cfg(feature = "codemode")]
use ishiki_codemode::Outcome;
#[cfg(feature = "codemode")]
use ishiki_codemode::ToolFailure;

/// `codemode({ code })`: runs a program in the sandbox (CM-1).
#[derive(Debug)]
pub(crate) struct CodemodeTool {
    description: String,
}

impl CodemodeTool {
    /// The description lists the signatures of the tools a program can call now; tools found
    /// later are announced with their signatures by catalog deltas (TS-4). `callable` holds
    /// their program-side definitions ([`Tool::program_view`]).
    pub(crate) fn new(callable: &[ToolDef]) -> Self {
        let mut description = String::from(
            "Run a JavaScript program (the body of an async function: top-level await and return work). \
Call tools as `await tools.name(input)`; they return raw results (read gives { type: \"text\", text } or { type: \"file\", url, mediaType, data /* base64 */ }). \
Only the final return value reaches you; intermediate data stays in the program. Each call starts fresh. \
To show media, return { ..., attachments: [item, ...] } where an item is an MCP image/audio block, a read file node, an embedded resource or { type: \"resource_link\", uri }, optionally with lifetime: \"once\" | \"recent\" | \"retain\".\n\nCallable tools:\n",
        );
        // One valid TypeScript block: the tools object, its type's members now, and the
        // types they share, each declared once; deltas add `interface Tools` blocks that merge.
        description.push_str(ishiki_toolsearch::TOOLS_CONST);
        description.push_str("\n\n");
        description.push_str(&ishiki_toolsearch::signatures(callable));
        Self { description }
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
        Err(ToolError::with_kind(
            ToolErrorKind::Input,
            "codemode cannot be called from inside a codemode program",
        ))
    }

    /// A program cannot start another program (CM-4).
    fn callable_from_programs(&self) -> bool {
        false
    }
}

#[async_trait]
impl DirectTool for CodemodeTool {
    /// Runs the program in the sandbox the runtime lends the call, with the tools callable now
    /// (CM-1, CM-2); the outcome's display goes through the outlet with the lifetimes its
    /// attachments asked for (CM-5..CM-7).
    async fn call_direct(
        &self,
        input: Value,
        call: &DirectCall<'_>,
    ) -> Result<DirectOutput, ToolError> {
        let Some(sandbox) = call.sandbox else {
            return Err(ToolError::with_kind(
                ToolErrorKind::Input,
                "codemode is not enabled in this profile",
            ));
        };
        let code = input
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let callable = callable_tools(call.shared, call.tools, call.context);
        // Date.now() in the program is the runtime's clock, so scenario runs stay deterministic.
        let clock_ms = crate::clock::unix_millis(call.shared.clock.now());
        let outcome = sandbox
            .run_at(code, callable, clock_ms)
            .await
            .map_err(codemode_tool_error)?;
        let (display, lifetimes) =
            codemode_display(call.shared, outcome, call.limits.clone()).await?;
        call.emit_with(display, &lifetimes).await
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
            &self.limits,
        )
        .await
        .map_err(|e| ToolFailure::new(e.message()))
    }
}

/// The tools callable from a program now: the available catalog minus `codemode`, `finish`,
/// `wait`; each as its program-side view ([`Tool::program_view`]), e.g. `read` without
/// `lifetime` (READ-2).
fn callable_tools(
    shared: &Arc<Shared>,
    tools: &dyn ToolLookup,
    context: &ToolContext,
) -> Vec<Arc<dyn CallableTool>> {
    let available: Vec<String> = shared
        .catalog_mut()
        .available()
        .iter()
        .map(|d| d.name.clone())
        .collect();
    let limits = CallLimits::from_profile(&shared.assembly.profile.tools, shared.abandoned.clone());
    let mut out: Vec<Arc<dyn CallableTool>> = Vec::new();
    for name in available {
        let Some((def, tool)) = tools
            .lookup(&name)
            .filter(|(_, t)| t.callable_from_programs())
        else {
            continue;
        };
        // What programs call: the tool's program-side view when it has one.
        let (tool, def) = match tool.program_view() {
            Some(view) => {
                let def = view.definition();
                (view, def)
            }
            None => (tool.clone(), def.clone()),
        };
        out.push(Arc::new(ProgramTool {
            tool,
            name,
            input_schema: def.input_schema,
            output_schema: def.output_schema,
            context: ToolContext {
                from_program: true,
                ..context.clone()
            },
            limits: limits.clone(),
        }));
    }
    out
}

/// The most attachments one program result may declare (issue 13): more is an error, before
/// anything is read.
pub(crate) const MAX_ATTACHMENTS_PER_RESULT: usize = MAX_MEDIA_PER_RESULT;

/// The display of a program's outcome: the returned value as JSON, captured console output,
/// then the declared attachments (CM-5..CM-7). Media returned by tools inside the program is
/// not looked at (CM-6).
///
/// Attachments are bounded like the program: at most [`MAX_ATTACHMENTS_PER_RESULT`], each
/// distinct URL read once, all reads under one deadline (`tools.timeoutMs`), and their bytes
/// together at most `tools.maxResultBytes`.
async fn codemode_display(
    shared: &Shared,
    outcome: Outcome,
    limits: CallLimits,
) -> Result<(ToolDisplay, Vec<Lifetime>), ToolError> {
    let declared = outcome.attachments.len();
    if declared > MAX_ATTACHMENTS_PER_RESULT {
        return Err(ToolError::with_kind(
            ToolErrorKind::Limit,
            format!(
                "the program returned {declared} attachments, over the limit of {MAX_ATTACHMENTS_PER_RESULT} per result: return at most {MAX_ATTACHMENTS_PER_RESULT}"
            ),
        ));
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
    let resolved = crate::guard::with_deadline("codemode", &limits, async {
        let mut resolved = HashMap::new();
        for url in urls {
            resolved.insert(url.to_owned(), shared.center.read(url).await);
        }
        Ok(resolved)
    })
    .await
    .map_err(|_| {
        ToolError::with_kind(ToolErrorKind::Limit, format!(
            "reading the program's attachments took longer than {} ms (tools.timeoutMs): attach fewer or smaller files",
            limits.timeout.as_millis()
        ))
    })?;
    let mut total: u64 = 0;
    let mut add_bytes = |n: usize| -> Result<(), ToolError> {
        total = total.saturating_add(n as u64);
        if total > limits.max_result_bytes {
            return Err(ToolError::with_kind(
                ToolErrorKind::Limit,
                format!(
                    "the program's attachments are larger than {} bytes together (tools.maxResultBytes): attach fewer or smaller files",
                    limits.max_result_bytes
                ),
            ));
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
                lifetimes.push(crate::convert::lifetime(item.lifetime));
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
                    lifetimes.push(crate::convert::lifetime(item.lifetime));
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
    Ok((ToolDisplay { parts }, lifetimes))
}
