//! Anthropic Messages: render a request with prompt-cache breakpoints, parse a response.
//!
//! Rendering rules:
//! - system messages before the first other message form the top-level `system`; later ones
//!   (catalog deltas) become user text blocks where they stand, so nothing earlier changes;
//! - roles alternate: consecutive user-side messages (user, tool results, attachments, later
//!   system messages) merge into one user message with its `tool_result` blocks first;
//! - a result whose `tool_use` is not in the assistant message just before it (text protocol,
//!   pruned history) becomes user text, since the API rejects an unpaired `tool_result`;
//! - the first message is a user message: when pruning left an assistant message first, or
//!   there is no message yet, a one-line user text stands before it;
//! - images become base64 `image` blocks; audio and media without data become text markers;
//!   empty texts are dropped (the API rejects empty text blocks);
//! - reasoning parts (`thinking`, `redacted_thinking` with their `signature`) made by this
//!   model are replayed verbatim where they stand, never carrying a cache marker; those of another
//!   provider or model, and those before the first message the projection changed since the
//!   previous request ([`AnthropicOptions::reasoning_from`]), are dropped, never edited.
//!
//! # Cache breakpoints
//!
//! At most four `cache_control: {type: "ephemeral"}` markers (the API's limit):
//! 1. on the last tool definition (or, without tools, on the last system block): tools and
//!    system change only when a search appends a tool;
//! 2. on the *stable end* of the request: the last block before the first attachment block that
//!    follows the newest assistant message. Attachments delivered for the first time may have
//!    lifetime `once` and vanish from the next request; everything before them stays unchanged
//!    until the next pruning (older attachments are `recent` or `retain`, and the history and
//!    catalog deltas are only ever appended to);
//! 3. on the stable end of the request as it was before the newest assistant message — where
//!    the previous request put marker 2 — so the next request reads what the previous one wrote
//!    even if the API's look-back from marker 2 would not reach it;
//! 4. on the last block before the first attachment: pruning removes the oldest attachments
//!    first, so this prefix survives a pruning and the request after it reads it.
//!
//! Markers that fall on the same block count once, so a request has at most four.

use std::collections::BTreeSet;

use ishiki_model::{Message, ModelResponse, Part, Reasoning, Request, Role, ToolCall, Usage};
use serde_json::{Map, Value, json};

use crate::common::{delta_text, has_text, is_attachment, keeps, media_marker};
use crate::error::{ProviderError, ProviderErrorKind};
use crate::parsed::ParsedResponse;

/// How to render for the Anthropic Messages API.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicOptions {
    /// The `model` field.
    pub model: String,
    /// `max_tokens` (required by the API).
    pub max_tokens: u32,
    /// Place `cache_control` breakpoints (see the module docs).
    pub cache: bool,
    /// The first message whose reasoning may be replayed (see
    /// [`ReplayState::plan`](crate::ReplayState::plan)); reasoning before it is dropped.
    pub reasoning_from: Option<usize>,
    /// `thinking.budget_tokens`: asks for extended thinking when set.
    pub thinking_budget: Option<u32>,
}

/// The provider tag of reasoning parts this API makes.
pub const ANTHROPIC: &str = "anthropic";

impl AnthropicOptions {
    /// Options for `model` with `max_tokens` and caching on.
    pub fn new(model: impl Into<String>, max_tokens: u32) -> Self {
        Self {
            model: model.into(),
            max_tokens,
            cache: true,
            reasoning_from: None,
            thinking_budget: None,
        }
    }
}

/// A rendered block and where it came from, for merging and breakpoints.
struct Block {
    value: Value,
    /// Index of the neutral message it renders.
    origin: usize,
    attachment: bool,
    tool_result: bool,
    /// A replayed reasoning block: never marked, never edited.
    reasoning: bool,
}

struct Turn {
    assistant: bool,
    blocks: Vec<Block>,
}

fn text_block(text: String) -> Option<Value> {
    (!text.is_empty()).then(|| json!({ "type": "text", "text": text }))
}

/// Renders a Messages API request body.
pub fn render_anthropic(request: &Request, options: &AnthropicOptions) -> Value {
    let leading = request
        .messages
        .iter()
        .take_while(|m| m.role == Role::System)
        .count();
    let mut system: Vec<Value> = Vec::new();
    for message in &request.messages[..leading] {
        let with_text = has_text(&message.content);
        for part in &message.content {
            system.extend(text_of(part, with_text).and_then(text_block));
        }
    }

    let mut turns: Vec<Turn> = Vec::new();
    let mut last_assistant = None;
    for (index, message) in request.messages.iter().enumerate().skip(leading) {
        let assistant = message.role == Role::Assistant;
        if assistant {
            last_assistant = Some(index);
        }
        // Calls a tool_result may answer: those of the assistant turn just before.
        let open_calls: BTreeSet<String> = match turns.last() {
            Some(turn) if turn.assistant => turn
                .blocks
                .iter()
                .filter_map(|b| b.value.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect(),
            _ => BTreeSet::new(),
        };
        let blocks = blocks_of(message, index, &open_calls, options);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(turn) if turn.assistant == assistant => {
                turn.blocks.extend(blocks);
                // The API wants tool results first in a user message; the sort is stable.
                turn.blocks.sort_by_key(|b| !b.tool_result);
            }
            _ => turns.push(Turn { assistant, blocks }),
        }
    }

    // The API wants a user message first; pruning can leave an assistant message there, and a
    // session may start without any message.
    let opening = match turns.first() {
        None => Some("[no messages yet]"),
        Some(turn) if turn.assistant => Some("[earlier messages are not shown]"),
        Some(_) => None,
    };
    if let Some(text) = opening {
        let block = Block {
            value: json!({ "type": "text", "text": text }),
            // Counted with the oldest history message.
            origin: leading,
            attachment: false,
            tool_result: false,
            reasoning: false,
        };
        turns.insert(
            0,
            Turn {
                assistant: false,
                blocks: vec![block],
            },
        );
    }

    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.input_schema }))
        .collect();

    if options.cache {
        let marker = || json!({ "type": "ephemeral" });
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), marker());
        } else if let Some(Value::Object(last)) = system.last_mut() {
            last.insert("cache_control".into(), marker());
        }
        let flat: Vec<(usize, usize, &Block)> = turns
            .iter()
            .enumerate()
            .flat_map(|(t, turn)| turn.blocks.iter().enumerate().map(move |(b, x)| (t, b, x)))
            .collect();
        let newest = stable_end(&flat, request.messages.len(), last_assistant);
        let before = last_assistant.and_then(|a| {
            let previous = request.messages[..a]
                .iter()
                .rposition(|m| m.role == Role::Assistant)
                .filter(|p| *p >= leading);
            stable_end(&flat, a, previous)
        });
        // Pruning drops the oldest attachments first, so what precedes the first one survives it.
        let first = flat
            .iter()
            .position(|(_, _, b)| b.attachment)
            .and_then(|k| k.checked_sub(1))
            .map(|k| (flat[k].0, flat[k].1));
        let mut marks: Vec<(usize, usize)> =
            newest.into_iter().chain(before).chain(first).collect();
        marks.sort_unstable();
        marks.dedup();
        for (t, b) in marks {
            if let Some(Value::Object(block)) = turns
                .get_mut(t)
                .and_then(|x| x.blocks.get_mut(b))
                .filter(|x| !x.reasoning)
                .map(|x| &mut x.value)
            {
                block.insert("cache_control".into(), marker());
            }
        }
    }

    let messages: Vec<Value> = turns
        .into_iter()
        .map(|turn| {
            json!({
                "role": if turn.assistant { "assistant" } else { "user" },
                "content": turn.blocks.into_iter().map(|b| b.value).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("max_tokens".into(), json!(options.max_tokens));
    if let Some(budget) = options.thinking_budget {
        body.insert(
            "thinking".into(),
            json!({ "type": "enabled", "budget_tokens": budget }),
        );
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// The position of the stable end among the blocks of messages before `limit`: the last block
/// before the first attachment block from a message after `assistant` (see the module docs).
fn stable_end(
    flat: &[(usize, usize, &Block)],
    limit: usize,
    assistant: Option<usize>,
) -> Option<(usize, usize)> {
    let mut end = None;
    for (t, b, block) in flat.iter().filter(|(_, _, x)| x.origin < limit) {
        let fresh = assistant.is_none_or(|a| block.origin > a);
        if block.attachment && fresh {
            break;
        }
        end = Some((*t, *b));
    }
    end
}

fn text_of(part: &Part, with_text: bool) -> Option<String> {
    match part {
        Part::Text { text } => Some(text.clone()),
        Part::CatalogDelta { added } if !with_text => Some(delta_text(added)),
        Part::CatalogDelta { .. } => None,
        Part::Image(m) => Some(media_marker("image", m, "not shown in this message")),
        Part::Audio(m) => Some(media_marker("audio", m, "not accepted by this api")),
        Part::ToolCall { id, name, input } => Some(format!("[call {id}: {name} {input}]")),
        Part::ToolResult { call_id, text, .. } => {
            Some(format!("[result of call {call_id}]\n{text}"))
        }
        Part::Reasoning(_) => None,
    }
}

fn blocks_of(
    message: &Message,
    origin: usize,
    open_calls: &BTreeSet<String>,
    options: &AnthropicOptions,
) -> Vec<Block> {
    let with_text = has_text(&message.content);
    let attachment = message.role == Role::User && is_attachment(&message.id);
    let block = |value: Value, tool_result: bool| Block {
        value,
        origin,
        attachment,
        tool_result,
        reasoning: false,
    };
    let mut out = Vec::new();
    for part in &message.content {
        match (message.role, part) {
            (Role::Assistant, Part::Reasoning(r))
                if keeps(r, origin, ANTHROPIC, &options.model, options.reasoning_from) =>
            {
                out.push(Block {
                    reasoning: true,
                    ..block(r.data.clone(), false)
                });
            }
            (Role::Assistant, Part::ToolCall { id, name, input }) => out.push(block(
                json!({ "type": "tool_use", "id": id, "name": name, "input": input }),
                false,
            )),
            (Role::User, Part::Image(m)) => match &m.data {
                Some(data) => out.push(block(
                    json!({
                        "type": "image",
                        "source": { "type": "base64", "media_type": m.media_type, "data": data },
                    }),
                    false,
                )),
                None => out.extend(
                    text_block(media_marker("image", m, "no data in this request"))
                        .map(|v| block(v, false)),
                ),
            },
            (
                Role::Tool,
                Part::ToolResult {
                    call_id,
                    is_error,
                    text,
                },
            ) if open_calls.contains(call_id) => {
                let mut result =
                    json!({ "type": "tool_result", "tool_use_id": call_id, "content": text });
                if *is_error {
                    result["is_error"] = json!(true);
                }
                out.push(block(result, true));
            }
            (_, part) => out.extend(
                text_of(part, with_text)
                    .and_then(text_block)
                    .map(|v| block(v, false)),
            ),
        }
    }
    out
}

/// Turns a provider's error object (`{type, message}`) into an [`ProviderErrorKind::Api`] error.
pub(crate) fn api_error(error: &Value) -> ProviderError {
    let kind = error
        .get("type")
        .or_else(|| error.get("code"))
        .and_then(Value::as_str)
        .unwrap_or("error");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    ProviderError::new(
        ProviderErrorKind::Api,
        format!("provider error ({kind}): {message}"),
    )
}

/// Parses a Messages API response body.
pub fn parse_anthropic_response(body: &Value) -> Result<ParsedResponse, ProviderError> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        return Err(api_error(body.get("error").unwrap_or(body)));
    }
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderError::malformed("anthropic response has no `content` array"))?;
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    let mut reasoning = Vec::new();
    for (k, block) in content.iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str).ok_or_else(|| {
            ProviderError::malformed(format!("anthropic content block {k} has no `type`"))
        })?;
        match kind {
            "text" => texts.push(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ProviderError::malformed(format!("anthropic text block {k} has no `text`"))
                    })?
                    .to_owned(),
            ),
            "tool_use" => {
                let field = |name: &str| {
                    block.get(name).and_then(Value::as_str).ok_or_else(|| {
                        ProviderError::malformed(format!(
                            "anthropic tool_use block {k} has no `{name}`"
                        ))
                    })
                };
                calls.push(ToolCall {
                    id: field("id")?.to_owned(),
                    name: field("name")?.to_owned(),
                    input: block.get("input").cloned().unwrap_or_else(|| json!({})),
                });
            }
            // Kept verbatim: the API checks their signatures when they come back.
            "thinking" | "redacted_thinking" => reasoning.push(Reasoning {
                provider: ANTHROPIC.to_owned(),
                model: model.to_owned(),
                data: block.clone(),
            }),
            // Server-tool blocks carry nothing the runtime commits.
            _ => {}
        }
    }
    let stop_reason = body
        .get("stop_reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let usage = body.get("usage").map(|u| {
        let n = |key: &str| u.get(key).and_then(Value::as_u64).unwrap_or(0);
        let read = n("cache_read_input_tokens");
        let write = n("cache_creation_input_tokens");
        Usage {
            // The API counts cached and cache-written tokens apart from `input_tokens`.
            input_tokens: n("input_tokens").saturating_add(read).saturating_add(write),
            output_tokens: n("output_tokens"),
            cache_read_tokens: read,
            cache_write_tokens: write,
        }
    });
    let text = texts.concat();
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

/// A request body laid out in the order the prompt cache reads it, for measuring prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheLayout {
    /// Tools, then system blocks, then each message's role and blocks, one JSON text per line,
    /// with `cache_control` markers removed (they are not part of the cached content).
    pub text: String,
    /// Byte offsets in `text` just after each block that carried a breakpoint, ascending.
    pub breakpoints: Vec<usize>,
}

/// Lays out a rendered Messages body for prefix measurement. The literal HTTP body is not
/// usable for that: JSON object keys are sorted, so `messages` precedes `tools` there.
pub fn anthropic_cache_layout(body: &Value) -> CacheLayout {
    let mut text = String::new();
    let mut breakpoints = Vec::new();
    let mut push = |value: &Value, text: &mut String| {
        let mut value = value.clone();
        let marked = value
            .as_object_mut()
            .is_some_and(|o| o.remove("cache_control").is_some());
        text.push_str(&value.to_string());
        text.push('\n');
        if marked {
            breakpoints.push(text.len());
        }
    };
    let list = |key: &str| {
        body.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for tool in list("tools") {
        push(&tool, &mut text);
    }
    for block in list("system") {
        push(&block, &mut text);
    }
    for message in list("messages") {
        text.push_str(
            message
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        text.push('\n');
        for block in message
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            push(block, &mut text);
        }
    }
    CacheLayout { text, breakpoints }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_layout_orders_tools_system_messages_and_strips_markers() {
        let body = json!({
            "messages": [{ "role": "user", "content": [
                { "type": "text", "text": "hi", "cache_control": { "type": "ephemeral" } },
                { "type": "text", "text": "more" }
            ] }],
            "system": [{ "type": "text", "text": "rules" }],
            "tools": [{ "name": "read", "cache_control": { "type": "ephemeral" } }],
        });
        let layout = anthropic_cache_layout(&body);
        assert_eq!(
            layout.text,
            "{\"name\":\"read\"}\n{\"text\":\"rules\",\"type\":\"text\"}\nuser\n\
             {\"text\":\"hi\",\"type\":\"text\"}\n{\"text\":\"more\",\"type\":\"text\"}\n"
        );
        let ends: Vec<&str> = layout
            .breakpoints
            .iter()
            .map(|&b| &layout.text[..b])
            .collect();
        assert!(ends[0].ends_with("{\"name\":\"read\"}\n"));
        assert!(ends[1].ends_with("\"hi\",\"type\":\"text\"}\n"));
        assert_eq!(layout.breakpoints.len(), 2);
    }
}
