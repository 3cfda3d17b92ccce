//! OpenAI Chat Completions: render a request, parse a response.
//!
//! Rendering rules:
//! - every neutral message keeps its place and role; system messages found after the start
//!   (catalog deltas) stay system (or developer) messages, so nothing earlier is rewritten;
//! - a `tool` message becomes one `role: "tool"` message per result, with `tool_call_id`;
//!   a result whose call is not in the request (text protocol, pruned history) becomes user
//!   text, since the API rejects a tool message without its call;
//! - images become `image_url` parts with `data:` URLs; audio becomes `input_audio` for wav and
//!   mp3 and a text marker otherwise; media without data becomes a text marker;
//! - tool errors carry no flag in this API: the outlet's text already says what failed;
//! - reasoning parts are dropped: Chat Completions has no way to take them back.

use std::collections::BTreeSet;

use ishiki_model::{Message, ModelResponse, Part, Request, Role, Usage};
use serde_json::{Map, Value, json};

use crate::common::{delta_text, has_text, media_marker};
use crate::error::ProviderError;
use crate::parsed::ParsedResponse;

/// How to render for OpenAI-compatible servers.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiOptions {
    /// The `model` field.
    pub model: String,
    /// The output token limit, if set, sent as `max_completion_tokens` (OpenAI deprecated
    /// `max_tokens`, and its reasoning models refuse it; vLLM and llama.cpp read both).
    pub max_tokens: Option<u32>,
    /// Render system messages with the `developer` role (OpenAI's reasoning models).
    pub developer_role: bool,
}

impl OpenAiOptions {
    /// Options for `model` with no token limit and `system` roles.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            max_tokens: None,
            developer_role: false,
        }
    }
}

/// Renders a Chat Completions request body.
pub fn render_openai(request: &Request, options: &OpenAiOptions) -> Value {
    let called: BTreeSet<&str> = request
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let mut messages = Vec::new();
    for message in &request.messages {
        render_message(message, options, &called, &mut messages);
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(max) = options.max_tokens {
        body.insert("max_completion_tokens".into(), json!(max));
    }
    Value::Object(body)
}

fn render_message(
    message: &Message,
    options: &OpenAiOptions,
    called: &BTreeSet<&str>,
    out: &mut Vec<Value>,
) {
    let with_text = has_text(&message.content);
    match message.role {
        Role::System => {
            let role = if options.developer_role {
                "developer"
            } else {
                "system"
            };
            let text = plain_text(&message.content, with_text);
            out.push(json!({ "role": role, "content": text }));
        }
        Role::User => {
            let parts = user_parts(&message.content, with_text);
            if !parts.is_empty() {
                out.push(json!({ "role": "user", "content": parts }));
            }
        }
        Role::Assistant => {
            let text = plain_text(&message.content, with_text);
            let calls: Vec<Value> = message
                .content
                .iter()
                .filter_map(|p| match p {
                    Part::ToolCall { id, name, input } => Some(json!({
                        "id": id,
                        "type": "function",
                        "function": { "name": name, "arguments": input.to_string() },
                    })),
                    _ => None,
                })
                .collect();
            let mut m = Map::new();
            m.insert("role".into(), json!("assistant"));
            m.insert(
                "content".into(),
                if text.is_empty() && !calls.is_empty() {
                    Value::Null
                } else {
                    json!(text)
                },
            );
            if !calls.is_empty() {
                m.insert("tool_calls".into(), Value::Array(calls));
            }
            out.push(Value::Object(m));
        }
        Role::Tool => {
            let mut orphans = Vec::new();
            for part in &message.content {
                match part {
                    Part::ToolResult { call_id, text, .. } if called.contains(call_id.as_str()) => {
                        out.push(
                            json!({ "role": "tool", "tool_call_id": call_id, "content": text }),
                        );
                    }
                    Part::ToolResult { call_id, text, .. } => orphans.push(json!({
                        "type": "text",
                        "text": ishiki_model::framed_result(call_id, text),
                    })),
                    other => orphans.extend(user_parts(std::slice::from_ref(other), with_text)),
                }
            }
            if !orphans.is_empty() {
                out.push(json!({ "role": "user", "content": orphans }));
            }
        }
    }
}

/// The text of a message's parts joined by blank lines (media as markers).
fn plain_text(parts: &[Part], with_text: bool) -> String {
    let texts: Vec<String> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.clone()),
            Part::CatalogDelta { added } if !with_text => Some(delta_text(added)),
            Part::Image(m) => Some(media_marker("image", m, "not shown in this message")),
            Part::Audio(m) => Some(media_marker("audio", m, "not shown in this message")),
            Part::Compaction(c) => crate::common::compaction_text(c),
            _ => None,
        })
        .collect();
    texts.join("\n\n")
}

fn user_parts(parts: &[Part], with_text: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } => out.push(json!({ "type": "text", "text": text })),
            Part::Compaction(c) => out.extend(
                crate::common::compaction_text(c)
                    .map(|text| json!({ "type": "text", "text": text })),
            ),
            Part::CatalogDelta { added } if !with_text => {
                out.push(json!({ "type": "text", "text": delta_text(added) }));
            }
            Part::CatalogDelta { .. } => {}
            Part::Image(m) => match &m.data {
                Some(data) => out.push(json!({
                    "type": "image_url",
                    "image_url": { "url": format!("data:{};base64,{data}", m.media_type) },
                })),
                None => out.push(json!({
                    "type": "text",
                    "text": media_marker("image", m, "no data in this request"),
                })),
            },
            Part::Audio(m) => {
                let format = match m.media_type.as_str() {
                    "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
                    "audio/mpeg" | "audio/mp3" => Some("mp3"),
                    _ => None,
                };
                match (&m.data, format) {
                    (Some(data), Some(format)) => out.push(json!({
                        "type": "input_audio",
                        "input_audio": { "data": data, "format": format },
                    })),
                    (None, _) => out.push(json!({
                        "type": "text",
                        "text": media_marker("audio", m, "no data in this request"),
                    })),
                    (Some(_), None) => out.push(json!({
                        "type": "text",
                        "text": media_marker("audio", m, "this format is not accepted here"),
                    })),
                }
            }
            Part::ToolCall { id, name, input } => out.push(json!({
                "type": "text",
                "text": format!("[call {id}: {name} {input}]"),
            })),
            Part::ToolResult { call_id, text, .. } => out.push(json!({
                "type": "text",
                "text": ishiki_model::framed_result(call_id, text),
            })),
            Part::Reasoning(_) => {}
        }
    }
    out
}

/// Parses a Chat Completions response body (the first choice).
pub fn parse_openai_response(body: &Value) -> Result<ParsedResponse, ProviderError> {
    if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
        return Err(crate::anthropic::api_error(error));
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderError::malformed("openai response has no `choices` array"))?
        .first()
        .ok_or_else(|| ProviderError::malformed("openai response has an empty `choices` array"))?;
    let message = choice
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| ProviderError::malformed("openai choice has no `message` object"))?;
    let text = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        // Some servers answer with content parts; keep their text.
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        Some(other) => {
            return Err(ProviderError::malformed(format!(
                "openai message `content` is neither text nor null: {other}"
            )));
        }
    };
    // A refusal is the model's answer too: kept as text, so it is shown and stored.
    let refusal = message
        .get("refusal")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    let mut parts: Vec<Part> = text
        .into_iter()
        .chain(refusal.map(str::to_owned))
        .filter(|t| !t.is_empty())
        .map(|text| Part::Text { text })
        .collect();
    if let Some(list) = message.get("tool_calls").filter(|v| !v.is_null()) {
        let list = list
            .as_array()
            .ok_or_else(|| ProviderError::malformed("openai `tool_calls` is not an array"))?;
        crate::common::check_items(list.len(), "tool calls")?;
        for (k, call) in list.iter().enumerate() {
            let field = |name: &str| {
                call.get(name)
                    .or_else(|| call.get("function").and_then(|f| f.get(name)))
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ProviderError::malformed(format!("openai tool call {k} has no `{name}`"))
                    })
            };
            let id = field("id")?;
            let name = field("name")?;
            let arguments = field("arguments")?;
            // Arguments that are not JSON are kept as a string: the runtime's schema check then
            // tells the model what was wrong, and the session goes on.
            let input = if arguments.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(arguments).unwrap_or_else(|_| json!(arguments))
            };
            parts.push(Part::ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                input,
            });
        }
    }
    let stop_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let usage = body.get("usage").filter(|u| u.is_object()).map(|u| {
        let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        Usage {
            input_tokens: n(u.get("prompt_tokens")),
            output_tokens: n(u.get("completion_tokens")),
            cache_read_tokens: n(u.pointer("/prompt_tokens_details/cached_tokens")),
            cache_write_tokens: 0,
        }
    });
    Ok(ParsedResponse {
        response: ModelResponse {
            parts,
            usage,
            ..ModelResponse::default()
        },
        stop_reason,
        usage: usage.unwrap_or_default(),
        ..ParsedResponse::default()
    })
}
