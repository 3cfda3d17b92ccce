//! `read` (READ-*, VIS-*): raw results for programs; pages, attachments and vision answers
//! for direct calls.

use std::sync::Arc;

use async_trait::async_trait;
use ishiki_outlet::{DisplayPart, Media, Outlet, ToolDisplay};
use ishiki_projection::Lifetime;
use ishiki_resources::ReadResult;
use ishiki_tool::{Tool, ToolContext, ToolError, ToolErrorKind};
use ishiki_toolsearch::ToolDef;
use serde_json::{Value, json};

use super::direct::{DirectCall, DirectOutput, DirectTool};
use super::{Shared, builtin_def, string_field};
use crate::convert::model_tool_error;
use crate::message::ModelError;

/// `read({ url, lifetime? })`: raw result for programs, pages and attachments for direct calls.
#[derive(Debug)]
pub(crate) struct ReadTool {
    shared: Arc<Shared>,
    for_program: bool,
}

impl ReadTool {
    /// `read` as the model calls it: pages, attachments, an optional `lifetime`.
    pub(crate) fn for_model(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            for_program: false,
        }
    }

    /// `read` as programs call it: raw results described by an output schema, no `lifetime`.
    pub(crate) fn for_programs(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            for_program: true,
        }
    }
}

/// The raw `read` result as programs see it (RES-7).
fn read_output_schema() -> Value {
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
fn read_schema(offer_lifetime: bool) -> Value {
    let mut properties = json!({
        "url": {
            "type": "string",
            "description": "Resource URL: workspace:///path, local:///path, artifact://tool/name, asset://<id>. File URLs take ?offset=N (bytes), ?lines=A-B and ?view=numbered. On an image, ?question=... asks the vision model about it."
        }
    });
    if offer_lifetime {
        properties["lifetime"] = json!({
            "type": "string",
            "enum": Lifetime::ALL.map(Lifetime::as_str),
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
        let mut def = builtin_def(
            "read",
            "Read a resource by URL: text comes back in pages (follow the [Continue …] line for more), images and audio as attachments.",
            read_schema(self.shared.image_input && !self.for_program),
        );
        if self.for_program {
            // Programs get the raw result (RES-7).
            def.output_schema = Some(read_output_schema());
        }
        def
    }

    fn program_view(&self) -> Option<Arc<dyn Tool>> {
        (!self.for_program)
            .then(|| Arc::new(ReadTool::for_programs(self.shared.clone())) as Arc<dyn Tool>)
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

#[async_trait]
impl DirectTool for ReadTool {
    /// Served by [`read_direct`] under the call's deadline, not through `execute`: text pages
    /// and media attachments come from the outlet.
    async fn call_direct(
        &self,
        input: Value,
        call: &DirectCall<'_>,
    ) -> Result<DirectOutput, ToolError> {
        let read = read_direct(&self.shared, call.outlet, &input);
        crate::guard::with_deadline(call.name, &call.limits, read).await
    }
}

/// Splits `?question=` off a URL (VIS-1): only `read` interprets it; other parameters stay.
/// The URL that remains is the text as the model wrote it with the pair cut out, never a
/// re-serialised parse: parsing resolves `..` and would let the resource center's checks on
/// the raw text (dot segments, SEC-2) pass, and errors would name a URL nobody wrote.
fn split_question(url: &str) -> Result<Option<(String, String)>, ToolError> {
    if !url.contains("question=") {
        return Ok(None);
    }
    let (before_fragment, fragment) = url.split_at(url.find('#').unwrap_or(url.len()));
    let Some((base, query)) = before_fragment.split_once('?') else {
        return Ok(None);
    };
    let mut question = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let decoded = url::form_urlencoded::parse(pair.as_bytes()).next();
        match decoded {
            Some((key, value)) if key == "question" => question = Some(value.into_owned()),
            _ => kept.push(pair),
        }
    }
    let Some(question) = question else {
        return Ok(None);
    };
    let rest = if kept.is_empty() {
        format!("{base}{fragment}")
    } else {
        format!("{base}?{}{fragment}", kept.join("&"))
    };
    Ok(Some((rest, question)))
}

/// VIS-1..VIS-3: the side model answers; never a fallback to the main model's image input.
async fn ask_vision(shared: &Shared, url: &str, question: &str) -> Result<String, ToolError> {
    if question.trim().is_empty() {
        return Err(ToolError::with_kind(
            ToolErrorKind::Input,
            format!(
                "the question for {url} is empty: write what you want to know after ?question="
            ),
        ));
    }
    let (Some(vision), Some(target)) = (&shared.vision, &shared.vision_target) else {
        return Err(ToolError::with_kind(
            ToolErrorKind::Input,
            "no vision model is configured (attachment.visionModel), so ?question= cannot be answered",
        ));
    };
    let result = shared.center.read(url).await?;
    let ReadResult::File {
        media_type, data, ..
    } = result
    else {
        return Err(ToolError::with_kind(
            ToolErrorKind::Input,
            format!("{url} is text, not an image: ?question= works on images only"),
        ));
    };
    if !media_type.starts_with("image/") {
        return Err(ToolError::with_kind(
            ToolErrorKind::Input,
            format!("{url} is {media_type}, not an image: ?question= works on images only"),
        ));
    }
    vision
        .ask(target, &media_type, &data, question)
        .await
        .map_err(|e| {
            model_tool_error(ModelError::new(
                e.kind(),
                format!("the vision model `{target}` failed: {}", e.message()),
            ))
        })
}

/// The input's `lifetime`; `once` when absent (the schema admits only the three names).
fn parse_lifetime(input: &Value) -> Lifetime {
    input
        .get("lifetime")
        .and_then(Value::as_str)
        .and_then(|name| name.parse().ok())
        .unwrap_or_default()
}

/// A direct `read`: FileScheme text pages from its own URL (OUT-6), other text through the
/// outlet's budget (OUT-5), media as an attachment (READ-2, READ-3) or, with image input off,
/// a description (READ-4).
async fn read_direct(
    shared: &Shared,
    outlet: &Outlet,
    input: &Value,
) -> Result<DirectOutput, ToolError> {
    let url = string_field(input, "url");
    if let Some((rest, question)) = split_question(url)? {
        let answer = ask_vision(shared, &rest, &question).await?;
        let emitted = outlet.emit("read", ToolDisplay::text(answer)).await?;
        return Ok(DirectOutput::from_emitted(emitted, &[]));
    }
    let lifetime = parse_lifetime(input);
    match shared.center.read(url).await? {
        ReadResult::Text {
            text,
            source: Some(source),
        } => Ok(DirectOutput::from_emitted(
            outlet.emit_read_text(&text, &source),
            &[],
        )),
        ReadResult::Text { text, source: None } => {
            let emitted = outlet.emit("read", ToolDisplay::text(text)).await?;
            Ok(DirectOutput::from_emitted(emitted, &[]))
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
                return Ok(DirectOutput {
                    text: format!(
                        "[{file_url}: {media_type}; {} bytes{dims}] {why}",
                        data.len()
                    ),
                    attachments: Vec::new(),
                    continuation: None,
                });
            }
            let display = ToolDisplay {
                parts: vec![DisplayPart::Media(Media {
                    media_type,
                    data,
                    url: Some(file_url),
                })],
            };
            let emitted = outlet.emit("read", display).await?;
            Ok(DirectOutput::from_emitted(emitted, &[lifetime]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_question_leaves_the_url_exactly_as_written() {
        // SEC-2: `..` must reach the resource center's raw-text check, not be resolved away.
        let (rest, q) = split_question("workspace:///img/../../etc/x.png?question=what%3F#f")
            .expect("valid")
            .expect("has a question");
        assert_eq!(rest, "workspace:///img/../../etc/x.png#f");
        assert_eq!(q, "what?");
        let (rest, _) = split_question("workspace:///a/%2e%2e/b.png?x=%41&question=q&y")
            .expect("valid")
            .expect("has a question");
        assert_eq!(rest, "workspace:///a/%2e%2e/b.png?x=%41&y");
    }
}
