//! OpenAI Responses: render a request as input items, parse a response's output items.
//!
//! Rendering rules:
//! - every neutral message keeps its place: system messages (catalog deltas too) become
//!   `message` items with role `system` (or `developer`) where they stand, user messages become
//!   `message` items with `input_text` and `input_image` parts;
//! - an assistant message becomes its replayed `reasoning` items (verbatim, with their
//!   `encrypted_content`), then a `message` item with its text, then one `function_call` item per
//!   call, in that order — the order the API produced them;
//! - a tool result becomes a `function_call_output` item; a result whose call is not in the
//!   request (text protocol, pruned history) becomes user text, since the API rejects an output
//!   without its call;
//! - the body asks for `store: false` with `include: ["reasoning.encrypted_content"]`, so the
//!   reasoning state travels in the history, not on OpenAI's servers; `prompt_cache_key` routes
//!   the requests of one session to the same prompt cache;
//! - reasoning of another provider or model, and reasoning before the first message the
//!   projection changed since the previous request, is dropped, never edited.

use std::collections::BTreeSet;

use ishiki_model::{Message, ModelResponse, Part, Reasoning, Request, Role, ToolCall, Usage};
use serde_json::{Map, Value, json};

use crate::common::{delta_text, has_text, keeps, media_marker};
use crate::error::ProviderError;
use crate::parsed::ParsedResponse;

/// The provider tag of reasoning items this API makes.
pub const OPENAI_RESPONSES: &str = "openai-responses";

/// How to render for the OpenAI Responses API.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesOptions {
    /// The `model` field.
    pub model: String,
    /// `max_output_tokens`, if set.
    pub max_output_tokens: Option<u32>,
    /// `prompt_cache_key`, if set: one stable key per session.
    pub prompt_cache_key: Option<String>,
    /// Render system messages with the `developer` role.
    pub developer_role: bool,
    /// The first message whose reasoning may be replayed (see
    /// [`ReplayState::plan`](crate::ReplayState::plan)); reasoning before it is dropped.
    pub reasoning_from: Option<usize>,
}

impl ResponsesOptions {
    /// Options for `model` with no token limit, no cache key and `system` roles.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            max_output_tokens: None,
            prompt_cache_key: None,
            developer_role: false,
            reasoning_from: None,
        }
    }
}

/// Renders a Responses API request body (`POST /responses`).
pub fn render_responses(request: &Request, options: &ResponsesOptions) -> Value {
    let called: BTreeSet<&str> = request
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let mut input = Vec::new();
    for (index, message) in request.messages.iter().enumerate() {
        render_message(message, index, options, &called, &mut input);
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("input".into(), Value::Array(input));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                    "strict": false,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    if let Some(key) = &options.prompt_cache_key {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    if let Some(max) = options.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    Value::Object(body)
}

fn render_message(
    message: &Message,
    index: usize,
    options: &ResponsesOptions,
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
            out.push(json!({ "type": "message", "role": role, "content": text }));
        }
        Role::User => {
            let parts = user_parts(&message.content, with_text);
            if !parts.is_empty() {
                out.push(json!({ "type": "message", "role": "user", "content": parts }));
            }
        }
        Role::Assistant => {
            for part in &message.content {
                if let Part::Reasoning(r) = part
                    && keeps(
                        r,
                        index,
                        OPENAI_RESPONSES,
                        &options.model,
                        options.reasoning_from,
                    )
                {
                    out.push(r.data.clone());
                }
            }
            let text = plain_text(&message.content, with_text);
            if !text.is_empty() {
                out.push(json!({ "type": "message", "role": "assistant", "content": text }));
            }
            for part in &message.content {
                if let Part::ToolCall { id, name, input } = part {
                    out.push(json!({
                        "type": "function_call",
                        "call_id": id,
                        "name": name,
                        "arguments": input.to_string(),
                    }));
                }
            }
        }
        Role::Tool => {
            let mut orphans = Vec::new();
            for part in &message.content {
                match part {
                    Part::ToolResult { call_id, text, .. } if called.contains(call_id.as_str()) => {
                        out.push(json!({
                            "type": "function_call_output",
                            "call_id": call_id,
                            "output": text,
                        }));
                    }
                    other => orphans.extend(user_parts(std::slice::from_ref(other), with_text)),
                }
            }
            if !orphans.is_empty() {
                out.push(json!({ "type": "message", "role": "user", "content": orphans }));
            }
        }
    }
}

/// The text of a message's parts joined by blank lines (media as markers, no reasoning).
fn plain_text(parts: &[Part], with_text: bool) -> String {
    let texts: Vec<String> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.clone()),
            Part::CatalogDelta { added } if !with_text => Some(delta_text(added)),
            Part::Image(m) => Some(media_marker("image", m, "not shown in this message")),
            Part::Audio(m) => Some(media_marker("audio", m, "not shown in this message")),
            _ => None,
        })
        .collect();
    texts.join("\n\n")
}

fn input_text(text: String) -> Value {
    json!({ "type": "input_text", "text": text })
}

fn user_parts(parts: &[Part], with_text: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } => out.push(input_text(text.clone())),
            Part::CatalogDelta { added } if !with_text => out.push(input_text(delta_text(added))),
            Part::CatalogDelta { .. } | Part::Reasoning(_) => {}
            Part::Image(m) => match &m.data {
                Some(data) => out.push(json!({
                    "type": "input_image",
                    "image_url": format!("data:{};base64,{data}", m.media_type),
                    "detail": "auto",
                })),
                None => out.push(input_text(media_marker(
                    "image",
                    m,
                    "no data in this request",
                ))),
            },
            Part::Audio(m) => out.push(input_text(media_marker(
                "audio",
                m,
                "not accepted by this api",
            ))),
            Part::ToolCall { id, name, input } => {
                out.push(input_text(format!("[call {id}: {name} {input}]")));
            }
            Part::ToolResult { call_id, text, .. } => {
                out.push(input_text(format!("[result of call {call_id}]\n{text}")));
            }
        }
    }
    out
}

/// Parses a Responses API response body (`object: "response"`).
pub fn parse_responses_response(body: &Value) -> Result<ParsedResponse, ProviderError> {
    if let Some(error) = body.get("error").filter(|e| !e.is_null()) {
        return Err(crate::anthropic::api_error(error));
    }
    let output = body
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderError::malformed("responses body has no `output` array"))?;
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut reasoning = Vec::new();
    for (k, item) in output.iter().enumerate() {
        let kind = item.get("type").and_then(Value::as_str).ok_or_else(|| {
            ProviderError::malformed(format!("responses output item {k} has no `type`"))
        })?;
        match kind {
            "message" => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let key = match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => "text",
                        Some("refusal") => "refusal",
                        _ => continue,
                    };
                    text.push_str(part.get(key).and_then(Value::as_str).unwrap_or_default());
                }
            }
            "function_call" => {
                let field = |name: &str| {
                    item.get(name).and_then(Value::as_str).ok_or_else(|| {
                        ProviderError::malformed(format!(
                            "responses function_call item {k} has no `{name}`"
                        ))
                    })
                };
                let arguments = field("arguments")?;
                // Arguments that are not JSON are kept as a string: the runtime's schema check
                // then tells the model what was wrong.
                let input = if arguments.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(arguments).unwrap_or_else(|_| json!(arguments))
                };
                calls.push(ToolCall {
                    id: field("call_id")?.to_owned(),
                    name: field("name")?.to_owned(),
                    input,
                });
            }
            "reasoning" => reasoning.push(Reasoning {
                provider: OPENAI_RESPONSES.to_owned(),
                model: model.to_owned(),
                data: item.clone(),
            }),
            // Built-in tool items carry nothing the runtime commits.
            _ => {}
        }
    }
    let status = body
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let stop_reason = match body
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str)
    {
        Some(reason) if status == "incomplete" => reason.to_owned(),
        _ if !calls.is_empty() => "tool_calls".to_owned(),
        _ => status.to_owned(),
    };
    let usage = body.get("usage").filter(|u| u.is_object()).map(|u| {
        let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        Usage {
            input_tokens: n(u.get("input_tokens")),
            output_tokens: n(u.get("output_tokens")),
            cache_read_tokens: n(u.pointer("/input_tokens_details/cached_tokens")),
            cache_write_tokens: 0,
        }
    });
    Ok(ParsedResponse {
        response: ModelResponse {
            text: (!text.is_empty()).then_some(text),
            calls,
            reasoning,
            usage,
        },
        stop_reason,
        usage: usage.unwrap_or_default(),
        ..ParsedResponse::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_reasoning_items_verbatim_and_reads_usage() {
        let reasoning = json!({ "type": "reasoning", "id": "rs_1", "summary": [],
            "encrypted_content": "gAAAA…" });
        let body = json!({ "object": "response", "model": "o-test", "status": "completed",
            "output": [reasoning, { "type": "function_call", "call_id": "call_1", "name": "read",
                "arguments": "{\"url\":\"x\"}", "id": "fc_1", "status": "completed" }],
            "usage": { "input_tokens": 100, "output_tokens": 7,
                "input_tokens_details": { "cached_tokens": 64 } } });
        let parsed = parse_responses_response(&body).expect("a valid body");
        assert_eq!(parsed.response.reasoning.len(), 1);
        assert_eq!(parsed.response.reasoning[0].data, reasoning);
        assert_eq!(parsed.response.reasoning[0].model, "o-test");
        assert_eq!(parsed.response.calls[0].input, json!({ "url": "x" }));
        assert_eq!(parsed.stop_reason, "tool_calls");
        assert_eq!(
            (parsed.usage.input_tokens, parsed.usage.cache_read_tokens),
            (100, 64)
        );
        let error = parse_responses_response(&json!({ "output": "x" })).expect_err("malformed");
        assert_eq!(error.message(), "responses body has no `output` array");
    }
}
