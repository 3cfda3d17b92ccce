//! OpenAI Responses: render a request as input items, parse a response's output items.
//!
//! Rendering rules:
//! - every neutral message keeps its place: system messages (catalog deltas too) become
//!   `message` items with role `system` (or `developer`) where they stand, user messages become
//!   `message` items with `input_text` and `input_image` parts;
//! - an assistant message becomes its items in the order the API produced them: replayed
//!   `reasoning` items (verbatim, with their `encrypted_content`), a `message` item per text
//!   part and a `function_call` item per call, so each reasoning item stays right before the
//!   item that followed it;
//! - a tool result becomes a `function_call_output` item; a result whose call is not in the
//!   request (text protocol, pruned history) becomes user text, since the API rejects an output
//!   without its call;
//! - the body asks for `store: false` with `include: ["reasoning.encrypted_content"]`, so the
//!   reasoning state travels in the history, not on OpenAI's servers; `prompt_cache_key` routes
//!   the requests of one session to the same prompt cache;
//! - reasoning of another provider or model is dropped, and so is reasoning whose prefix changed
//!   since it was made ([`crate::replay`]); nothing is ever edited.

use std::collections::BTreeSet;

use ishiki_model::{Compacted, Message, ModelResponse, Part, Reasoning, Request, Role, Usage};
use serde_json::{Map, Value, json};

use crate::common::{
    ReplayReport, delta_text, has_text, is_attachment, is_own, is_own_compaction, media_marker,
};
use crate::error::ProviderError;
use crate::parsed::ParsedResponse;
use crate::replay::Prefix;

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
    /// The `reasoning` parameter verbatim (`{"effort": "high", "summary": "auto"}`), if any.
    pub reasoning: Option<Value>,
    /// Explicit prompt-cache breakpoints (`prompt_cache_options` with up to three
    /// `prompt_cache_breakpoint`s on stable input blocks; GPT-5.6 and later).
    pub cache_breakpoints: bool,
    /// Replay a reasoning item only while its prefix is unchanged ([`crate::replay`]), as on
    /// models that bind reasoning to its prefix. Off by default: the Responses API documents
    /// no such binding, only that a reasoning item comes with the item that followed it.
    pub preserved_reasoning: bool,
}

impl ResponsesOptions {
    /// Options for `model` with no token limit, no cache key and `system` roles.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            max_output_tokens: None,
            prompt_cache_key: None,
            developer_role: false,
            reasoning: None,
            preserved_reasoning: false,
            cache_breakpoints: false,
        }
    }
}

/// Renders a Responses API request body (`POST /responses`).
pub fn render_responses(request: &Request, options: &ResponsesOptions) -> Value {
    render_responses_with_report(request, options).0
}

/// One rendered input item, or a reasoning item the replay rule still has to admit.
enum Unit {
    Item(Value),
    Reasoning(Reasoning),
}

/// [`render_responses`], and what it did with the request's reasoning parts.
pub fn render_responses_with_report(
    request: &Request,
    options: &ResponsesOptions,
) -> (Value, ReplayReport) {
    let mut report = ReplayReport::default();
    let called: BTreeSet<&str> = request
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    let tools: Vec<Value> = request
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
    // The replay rule (crate::replay): tools, then every input item in order; a reasoning item
    // stays only where the prefix before its assistant turn is the one it was made on.
    // Only a model that binds reasoning pays for the digest (it hashes the whole request).
    let mut prefix = options.preserved_reasoning.then(Prefix::default);
    if let Some(prefix) = &mut prefix {
        for tool in &tools {
            prefix.push(tool);
        }
    }
    let mut input = Vec::new();
    let mut users: Vec<UserItem> = Vec::new();
    for (index, message) in request.messages.iter().enumerate() {
        let mut units = Vec::new();
        render_message(message, options, &called, &mut units, &mut report);
        let start = prefix
            .as_ref()
            .filter(|_| message.role == Role::Assistant)
            .map(Prefix::digest);
        for unit in units {
            let item = match unit {
                Unit::Item(item) => item,
                Unit::Reasoning(r)
                    if prefix.is_none()
                        || start.as_deref().is_some_and(|s| Prefix::keeps(s, &r)) =>
                {
                    report.kept += 1;
                    r.data
                }
                Unit::Reasoning(_) => {
                    report.dropped_changed += 1;
                    report.first_dropped.get_or_insert(index);
                    continue;
                }
            };
            if let Some(prefix) = &mut prefix {
                prefix.push(&item);
            }
            if item["role"] == "user" && item["content"].is_array() {
                users.push(UserItem {
                    at: input.len(),
                    attachment: is_attachment(&message.id),
                    origin: index,
                });
            }
            input.push(item);
        }
    }
    if options.cache_breakpoints {
        let newest_assistant = request
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant);
        for at in breakpoints(&users, newest_assistant) {
            if let Some(Value::Object(last)) = input[at]
                .get_mut("content")
                .and_then(Value::as_array_mut)
                .and_then(|blocks| blocks.last_mut())
            {
                last.insert(
                    "prompt_cache_breakpoint".into(),
                    json!({ "mode": "explicit" }),
                );
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("input".into(), Value::Array(input));
    if !tools.is_empty() {
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
    if let Some(reasoning) = &options.reasoning {
        body.insert("reasoning".into(), reasoning.clone());
    }
    if options.cache_breakpoints {
        body.insert(
            "prompt_cache_options".into(),
            json!({ "mode": "implicit", "ttl": "30m" }),
        );
    }
    (Value::Object(body), report)
}

/// A rendered user message item: where it is, and whether the projection made it.
struct UserItem {
    at: usize,
    attachment: bool,
    origin: usize,
}

/// Where explicit cache breakpoints go (at most three, beside the API's implicit one): the end
/// of the first user message (tools, system and the opening stay for the whole session); the
/// last user message before the first attachment (pruning removes the oldest attachments
/// first, so this prefix survives it); and the last user message that is not an attachment
/// delivered for the first time after the newest assistant turn (a `once` image may leave the
/// next request). Only input content blocks take a breakpoint (Responses "Prompt caching").
fn breakpoints(users: &[UserItem], newest_assistant: Option<usize>) -> Vec<usize> {
    let first = users.first().map(|u| u.at);
    let before_attachments = users
        .iter()
        .take_while(|u| !u.attachment)
        .last()
        .map(|u| u.at);
    let stable_end = users
        .iter()
        .rfind(|u| !(u.attachment && newest_assistant.is_none_or(|a| u.origin > a)))
        .map(|u| u.at);
    let mut out: Vec<usize> = [first, before_attachments, stable_end]
        .into_iter()
        .flatten()
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The digest of `body`'s prefix as [`render_responses`] feeds it: the stamp of the reasoning
/// in the response to `body` (see [`crate::replay`]).
pub(crate) fn responses_response_prefix(body: &Value) -> String {
    let list = |key: &str| {
        body.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut prefix = Prefix::default();
    for unit in list("tools").iter().chain(&list("input")) {
        prefix.push(unit);
    }
    prefix.digest()
}

fn render_message(
    message: &Message,
    options: &ResponsesOptions,
    called: &BTreeSet<&str>,
    out: &mut Vec<Unit>,
    report: &mut ReplayReport,
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
            out.push(Unit::Item(
                json!({ "type": "message", "role": role, "content": text }),
            ));
        }
        Role::User => {
            let parts = user_parts(&message.content, with_text);
            if !parts.is_empty() {
                out.push(Unit::Item(
                    json!({ "type": "message", "role": "user", "content": parts }),
                ));
            }
        }
        Role::Assistant => {
            // In the order the API produced them: a reasoning item must stay right before the
            // item that followed it.
            for part in &message.content {
                match part {
                    Part::Reasoning(r) if is_own(r, OPENAI_RESPONSES, &options.model) => {
                        out.push(Unit::Reasoning(r.clone()));
                    }
                    Part::Reasoning(_) => report.dropped_foreign += 1,
                    Part::ToolCall { id, name, input } => out.push(Unit::Item(json!({
                        "type": "function_call",
                        "call_id": id,
                        "name": name,
                        "arguments": input.to_string(),
                    }))),
                    Part::Text { text } if !text.is_empty() => out.push(Unit::Item(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": text,
                    }))),
                    Part::CatalogDelta { added } if !with_text => out.push(Unit::Item(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": delta_text(added),
                    }))),
                    Part::Image(m) | Part::Audio(m) => out.push(Unit::Item(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": media_marker("media", m, "not shown in this message"),
                    }))),
                    // The compacted window, verbatim, where the context engine put it (first).
                    Part::Compaction(c)
                        if is_own_compaction(c, OPENAI_RESPONSES, &options.model)
                            && c.data.is_array() =>
                    {
                        for item in c.data.as_array().into_iter().flatten() {
                            out.push(Unit::Item(item.clone()));
                        }
                    }
                    Part::Compaction(c) => {
                        out.extend(crate::common::compaction_text(c).map(|text| {
                            Unit::Item(json!({
                                "type": "message",
                                "role": "assistant",
                                "content": text,
                            }))
                        }));
                    }
                    Part::Text { .. } | Part::CatalogDelta { .. } | Part::ToolResult { .. } => {}
                }
            }
        }
        Role::Tool => {
            let mut orphans = Vec::new();
            for part in &message.content {
                match part {
                    Part::ToolResult { call_id, text, .. } if called.contains(call_id.as_str()) => {
                        out.push(Unit::Item(json!({
                            "type": "function_call_output",
                            "call_id": call_id,
                            "output": text,
                        })));
                    }
                    other => orphans.extend(user_parts(std::slice::from_ref(other), with_text)),
                }
            }
            if !orphans.is_empty() {
                out.push(Unit::Item(
                    json!({ "type": "message", "role": "user", "content": orphans }),
                ));
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
            Part::Compaction(c) => out.extend(crate::common::compaction_text(c).map(input_text)),
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
                out.push(input_text(ishiki_model::framed_result(call_id, text)));
            }
        }
    }
    out
}

/// A `/responses/compact` answer (`object: "response.compaction"`): the compacted window, the
/// kept user messages then one `compaction` item, kept whole as one opaque part.
fn parse_compaction(output: &[Value], model: &str) -> Result<ParsedResponse, ProviderError> {
    let compactions = output.iter().filter(|i| i["type"] == "compaction").count();
    let last = output.last().map(|i| &i["type"]);
    if compactions != 1 || last != Some(&Value::from("compaction")) {
        return Err(ProviderError::malformed(format!(
            "a compaction answer must end with its one `compaction` item ({compactions} found)"
        )));
    }
    if !output[output.len() - 1]["encrypted_content"].is_string() {
        return Err(ProviderError::malformed(
            "the `compaction` item has no `encrypted_content`",
        ));
    }
    if let Some(other) = output[..output.len() - 1]
        .iter()
        .find(|i| !(i["type"] == "message" && i["role"] == "user"))
    {
        return Err(ProviderError::malformed(format!(
            "a compaction answer keeps user messages only, not {}",
            other["type"]
        )));
    }
    Ok(ParsedResponse {
        response: ModelResponse {
            parts: vec![Part::Compaction(Compacted {
                provider: OPENAI_RESPONSES.to_owned(),
                model: model.to_owned(),
                data: Value::Array(output.to_vec()),
                // The summary is encrypted: nothing readable comes with it.
                summary: None,
            })],
            ..ModelResponse::default()
        },
        stop_reason: "compaction".to_owned(),
        ..ParsedResponse::default()
    })
}

/// Parses a Responses API response body (`object: "response"`, or a `/responses/compact`
/// answer, `object: "response.compaction"`, as one [`Part::Compaction`]).
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
    crate::common::check_items(output.len(), "output items")?;
    if body.get("object").and_then(Value::as_str) == Some("response.compaction") {
        return parse_compaction(output, model);
    }
    let mut parts = Vec::new();
    for (k, item) in output.iter().enumerate() {
        let kind = item.get("type").and_then(Value::as_str).ok_or_else(|| {
            ProviderError::malformed(format!("responses output item {k} has no `type`"))
        })?;
        match kind {
            // One text part per message item, so the items replay in the order they came.
            "message" => {
                let mut text = String::new();
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
                if !text.is_empty() {
                    parts.push(Part::Text { text });
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
                parts.push(Part::ToolCall {
                    id: field("call_id")?.to_owned(),
                    name: field("name")?.to_owned(),
                    input,
                });
            }
            "reasoning" => parts.push(Part::Reasoning(Reasoning {
                provider: OPENAI_RESPONSES.to_owned(),
                model: model.to_owned(),
                data: item.clone(),
                prefix: None,
            })),
            // Built-in tool items carry nothing the runtime commits.
            _ => {}
        }
    }
    let has_calls = parts.iter().any(|p| matches!(p, Part::ToolCall { .. }));
    let status = body
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let stop_reason = match body
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str)
    {
        Some(reason) if status == "incomplete" => reason.to_owned(),
        _ if has_calls => "tool_calls".to_owned(),
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
            parts,
            usage,
            ..ModelResponse::default()
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
        let kept: Vec<&Reasoning> = parsed.response.reasoning().collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].data, reasoning);
        assert_eq!(kept[0].model, "o-test");
        assert_eq!(parsed.response.calls()[0].input, json!({ "url": "x" }));
        assert_eq!(parsed.stop_reason, "tool_calls");
        assert_eq!(
            (parsed.usage.input_tokens, parsed.usage.cache_read_tokens),
            (100, 64)
        );
        let error = parse_responses_response(&json!({ "output": "x" })).expect_err("malformed");
        assert_eq!(error.message(), "responses body has no `output` array");
    }
}
