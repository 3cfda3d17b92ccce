//! Direct calls from the model: what the runtime lends one ([`DirectCall`]), what comes out
//! ([`DirectOutput`]), and how a tool serves one. A plug-in tool is served the one way
//! ([`call_plain`]: `execute` under the call's limits, then `to_model_output` through the
//! outlet); the built-ins that serve the model differently from programs (`read` pages text
//! and attaches media, `codemode` runs a program) implement [`DirectTool`]. Kept here, beside
//! the built-ins, so that the public `Tool` trait needs none of the runtime's internals.

use std::sync::Arc;

use async_trait::async_trait;
use ishiki_outlet::{DisplayPart, Emitted, MediaRef, Outlet, ToolDisplay};
use ishiki_projection::Lifetime;
use ishiki_tool::{Tool, ToolContext, ToolError};
use ishiki_toolsearch::ToolDef;
use serde_json::Value;

use super::Shared;
use crate::guard::CallLimits;

/// A built-in tool's own way of serving a direct call from the model.
#[async_trait]
pub(crate) trait DirectTool: Tool {
    /// What the model will read of the call.
    async fn call_direct(
        &self,
        input: Value,
        call: &DirectCall<'_>,
    ) -> Result<DirectOutput, ToolError>;
}

/// The registered tools by name, as a direct call sees them (what a program may call is chosen
/// from them); the runtime's registry is the one implementation.
pub(crate) trait ToolLookup: Send + Sync + std::fmt::Debug {
    /// The tool `name` with its definition.
    #[cfg_attr(
        not(feature = "codemode"),
        expect(dead_code, reason = "programs read it")
    )]
    fn lookup(&self, name: &str) -> Option<(&ToolDef, &Arc<dyn Tool>)>;
}

/// A direct call of any other tool: the called tool's [`Tool::execute`] under the call's
/// limits ([`DirectCall::execute`]), the raw result rendered by its [`Tool::to_model_output`]
/// and sent through the outlet ([`DirectCall::emit`]).
pub(crate) async fn call_plain(
    input: Value,
    call: &DirectCall<'_>,
) -> Result<DirectOutput, ToolError> {
    let raw = call.execute(input).await?;
    call.emit(call.tool.to_model_output(&raw)).await
}

/// What the runtime lends one direct call: the call's context and limits (`tools.timeoutMs`,
/// `tools.maxResultBytes`), the outlet that decides what the model reads (OUT-1), and, for the
/// built-in tools, the runtime's services (resource center, catalog, registered tools,
/// codemode sandbox). Only the runtime builds one.
#[derive(Debug)]
pub(crate) struct DirectCall<'a> {
    /// The called tool, so that [`DirectCall::execute`] can run it on the blocking pool.
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) name: &'a str,
    pub(crate) context: &'a ToolContext,
    pub(crate) limits: CallLimits,
    pub(crate) outlet: &'a Outlet,
    #[cfg_attr(
        not(feature = "codemode"),
        expect(dead_code, reason = "programs read it")
    )]
    pub(crate) shared: &'a Arc<Shared>,
    /// Every registered tool with its definition (what a program may call is chosen from it).
    #[cfg_attr(
        not(feature = "codemode"),
        expect(dead_code, reason = "programs read it")
    )]
    pub(crate) tools: &'a dyn ToolLookup,
    #[cfg_attr(
        not(feature = "codemode"),
        expect(dead_code, reason = "programs read it")
    )]
    pub(crate) sandbox: Option<&'a super::Sandbox>,
}

impl DirectCall<'_> {
    /// Runs the called tool's [`Tool::execute`] under the call's limits: it fails when the
    /// deadline passes first (the work is abandoned), when the tool panics, or when the raw
    /// result is larger than the cap.
    pub(crate) async fn execute(&self, input: Value) -> Result<Value, ToolError> {
        crate::guard::execute(
            self.tool.clone(),
            self.name,
            input,
            self.context,
            &self.limits,
        )
        .await
    }

    /// Sends a display through the outlet: the text the model reads (budgeted, with a
    /// continuation when there is more) and its media as attachments of lifetime `once`.
    pub(crate) async fn emit(&self, display: ToolDisplay) -> Result<DirectOutput, ToolError> {
        self.emit_with(display, &[]).await
    }

    /// [`DirectCall::emit`] with the lifetimes asked for the attachments, in order.
    pub(crate) async fn emit_with(
        &self,
        display: ToolDisplay,
        lifetimes: &[Lifetime],
    ) -> Result<DirectOutput, ToolError> {
        let emitted = self.outlet.emit(self.name, cap_media(display)).await?;
        Ok(DirectOutput::from_emitted(emitted, lifetimes))
    }
}

/// The most media items one tool result shows the model; a program's `attachments[]` has the
/// same cap. More would queue for hundreds of requests and keep later images out.
pub(crate) const MAX_MEDIA_PER_RESULT: usize = 32;

/// Keeps the first [`MAX_MEDIA_PER_RESULT`] media items of a display and puts one note where
/// the rest would have been shown.
fn cap_media(display: ToolDisplay) -> ToolDisplay {
    let total = display
        .parts
        .iter()
        .filter(|p| matches!(p, DisplayPart::Media(_)))
        .count();
    if total <= MAX_MEDIA_PER_RESULT {
        return display;
    }
    let mut kept = 0;
    let mut parts = Vec::with_capacity(display.parts.len() - (total - MAX_MEDIA_PER_RESULT) + 1);
    for part in display.parts {
        match part {
            DisplayPart::Media(media) if kept < MAX_MEDIA_PER_RESULT => {
                kept += 1;
                parts.push(DisplayPart::Media(media));
            }
            DisplayPart::Media(_) => {}
            DisplayPart::Text(text) => parts.push(DisplayPart::Text(text)),
        }
    }
    parts.push(DisplayPart::Text(format!(
        "[{} more media items of this result were left out: a result shows at most {MAX_MEDIA_PER_RESULT}]",
        total - MAX_MEDIA_PER_RESULT
    )));
    ToolDisplay { parts }
}

/// The outcome of a direct call as the model will see it: text, attachments with their
/// lifetimes, and the `read` input that continues the text, if there is more. Made by
/// [`DirectCall::emit`].
#[derive(Debug)]
pub(crate) struct DirectOutput {
    pub(crate) text: String,
    pub(crate) attachments: Vec<(MediaRef, Lifetime)>,
    pub(crate) continuation: Option<String>,
}

impl DirectOutput {
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
