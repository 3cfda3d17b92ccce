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
//! - later system messages become mid-conversation `role: "system"` messages where the model
//!   takes them ([`AnthropicOptions::system_messages`]) and the API allows one there (after a
//!   user message, not right before one or right after an assistant turn); elsewhere they are
//!   user text blocks where they stand, so nothing earlier changes;
//! - an assistant turn is replayed in the order it was received: text blocks, `tool_use` and
//!   reasoning parts (`thinking`, `redacted_thinking` with their `signature`) where they stood,
//!   reasoning never carrying a cache marker. Reasoning of another provider or model is
//!   dropped, and so is reasoning whose prefix changed since it was made ([`crate::replay`]:
//!   that block and every later one made before the change); nothing is ever edited;
//! - the provider's own compaction ([`ishiki_model::Compacted`], made by this API for this
//!   model) is sent back verbatim as the first block of the conversation, in an assistant
//!   message (no opening user text before it); the tools its `tool_changes` add stay out of
//!   `tools`, as while the system messages it replaced were sent. Anywhere else, or from
//!   another provider or model, its summary is text;
//! - on models with preserved thinking ([`AnthropicOptions::drop_invalid_thinking`]) the body
//!   asks the API to drop, not refuse, a block whose prefix check fails, as a safety net.
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

use ishiki_model::{Compacted, Message, ModelResponse, Part, Reasoning, Request, Role, Usage};
use serde_json::{Map, Value, json};

use crate::common::{
    ReplayReport, delta_text, has_text, is_attachment, is_own, is_own_compaction, media_marker,
};
use crate::error::{ProviderError, ProviderErrorKind};
use crate::parsed::ParsedResponse;
use crate::replay::Prefix;

/// How to render for the Anthropic Messages API.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicOptions {
    /// The `model` field.
    pub model: String,
    /// `max_tokens` (required by the API).
    pub max_tokens: u32,
    /// Place `cache_control` breakpoints (see the module docs).
    pub cache: bool,
    /// The `thinking` parameter, if any.
    pub thinking: Option<Thinking>,
    /// The model binds each thinking block to its prefix (preserved thinking: Claude Fable and
    /// Mythos 5.1 and 5.2, Opus, Sonnet and Haiku 5.5). Then a block is replayed only while its
    /// prefix is unchanged ([`crate::replay`]); otherwise every block of this model is replayed
    /// (older models check a block's own signature only).
    pub preserved_thinking: bool,
    /// Send `thinking.block_binding.prefix_mismatch_behavior: "drop_block"` (with the beta
    /// header [`THINKING_BINDING_BETA`]): on models with preserved thinking the API then drops a
    /// thinking block whose prefix changed instead of refusing the request, and lists it in the
    /// response's `input_transformations`. A safety net: the replay rule already leaves such
    /// blocks out.
    pub drop_invalid_thinking: bool,
    /// Render later system messages as mid-conversation `role: "system"` messages where the
    /// API allows one (models that take them); otherwise they are user text. A catalog delta
    /// in such a message adds its tools natively (`tool_addition` blocks with the tool's
    /// definition, beta [`INLINE_TOOLS_BETA`]) instead of growing `tools`, so the prefix of
    /// every earlier thinking block stays.
    pub system_messages: bool,
}

/// The beta header value that lets a `tool_addition` block define its tool inline.
pub const INLINE_TOOLS_BETA: &str = "inline-tools-2026-09-15";

/// The beta header value of a compaction request (`compaction: {type: "summarize"}`).
pub const COMPACTION_BETA: &str = "compact-2026-09-04";

/// The beta header value that enables `thinking.block_binding`.
pub const THINKING_BINDING_BETA: &str = "thinking-binding-controls-2026-08-01";

/// The `thinking` parameter of a Messages request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Thinking {
    /// `{type: "enabled", budget_tokens}`: extended thinking on models before Opus 4.7 (newer
    /// families refuse it).
    Budget(u32),
    /// `{type: "adaptive"}` with `output_config.effort` when set (`low`, `medium`, `high`,
    /// `max`): the model decides how much to think.
    Adaptive {
        /// `output_config.effort`.
        effort: Option<String>,
        /// `display: "summarized"`: the thinking text comes back summarized (newer models
        /// omit it by default); not part of the prefix check.
        summarized: bool,
    },
}

/// The provider tag of reasoning parts this API makes.
pub const ANTHROPIC: &str = "anthropic";

impl AnthropicOptions {
    /// Options for `model` with `max_tokens` and caching on, no thinking parameter, and thinking
    /// replayed as on a model that binds it to its prefix (the rule that never gets a 400).
    pub fn new(model: impl Into<String>, max_tokens: u32) -> Self {
        Self {
            model: model.into(),
            max_tokens,
            cache: true,
            thinking: None,
            preserved_thinking: true,
            drop_invalid_thinking: false,
            system_messages: false,
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
    reasoning: Option<Reasoning>,
    /// The provider's own compaction block, sent back first.
    compaction: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Speaker {
    User,
    Assistant,
    /// A mid-conversation system message.
    System,
}

impl Speaker {
    fn role(self) -> &'static str {
        match self {
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
            Speaker::System => "system",
        }
    }
}

struct Turn {
    speaker: Speaker,
    blocks: Vec<Block>,
}

fn text_block(text: String) -> Option<Value> {
    (!text.is_empty()).then(|| json!({ "type": "text", "text": text }))
}

/// Renders a Messages API request body.
pub fn render_anthropic(request: &Request, options: &AnthropicOptions) -> Value {
    render_anthropic_with_report(request, options).0
}

/// [`render_anthropic`], and what it did with the request's reasoning parts.
pub fn render_anthropic_with_report(
    request: &Request,
    options: &AnthropicOptions,
) -> (Value, ReplayReport) {
    let mut report = ReplayReport::default();
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
    let mut natively_added: BTreeSet<String> = BTreeSet::new();
    for (index, message) in request.messages.iter().enumerate().skip(leading) {
        let speaker = match message.role {
            Role::Assistant => Speaker::Assistant,
            // The API takes a system message (or a run of them) right after a user turn and
            // before an assistant turn or at the end; anywhere else it answers 400, so it
            // stays user text there.
            Role::System
                if options.system_messages
                    && turns
                        .last()
                        .is_some_and(|t| matches!(t.speaker, Speaker::User | Speaker::System))
                    && request.messages[index + 1..]
                        .iter()
                        .find(|next| next.role != Role::System)
                        .is_none_or(|next| next.role == Role::Assistant) =>
            {
                Speaker::System
            }
            Role::System | Role::User | Role::Tool => Speaker::User,
        };
        if speaker == Speaker::Assistant {
            last_assistant = Some(index);
        }
        // Calls a tool_result may answer: those of the assistant turn just before.
        let open_calls: BTreeSet<String> = match turns.last() {
            Some(turn) if turn.speaker == Speaker::Assistant => turn
                .blocks
                .iter()
                .filter_map(|b| b.value.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect(),
            _ => BTreeSet::new(),
        };
        let mut blocks = blocks_of(message, index, leading, &open_calls, options, &mut report);
        if speaker == Speaker::System {
            // Tools a catalog delta announces join natively, in the delta's own message.
            let mut additions = Vec::new();
            for part in &message.content {
                if let Part::CatalogDelta { added } = part {
                    for entry in added {
                        natively_added.insert(entry.name.clone());
                        additions.push(Block {
                            value: json!({ "type": "tool_addition", "tool": {
                                "type": "tool_definition",
                                "definition": { "name": entry.name,
                                    "description": entry.description,
                                    "input_schema": entry.input_schema } } }),
                            origin: index,
                            attachment: false,
                            tool_result: false,
                            reasoning: None,
                            compaction: false,
                        });
                    }
                }
            }
            blocks.splice(0..0, additions);
        }
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(turn) if turn.speaker == speaker && speaker != Speaker::System => {
                turn.blocks.extend(blocks);
                if speaker == Speaker::User {
                    // The API wants tool results first in a user message; the sort is stable.
                    turn.blocks.sort_by_key(|b| !b.tool_result);
                }
            }
            _ => turns.push(Turn { speaker, blocks }),
        }
    }

    // The API wants a user message first; pruning can leave an assistant message there, and a
    // session may start without any message.
    let opening = match turns.first() {
        None => Some("[no messages yet]"),
        // The provider's own compaction opens the conversation in an assistant message.
        Some(turn) if turn.blocks.first().is_some_and(|b| b.compaction) => None,
        Some(turn) if turn.speaker != Speaker::User => Some("[earlier messages are not shown]"),
        Some(_) => None,
    };
    if let Some(text) = opening {
        let block = Block {
            value: json!({ "type": "text", "text": text }),
            // Counted with the oldest history message.
            origin: leading,
            attachment: false,
            tool_result: false,
            reasoning: None,
            compaction: false,
        };
        turns.insert(
            0,
            Turn {
                speaker: Speaker::User,
                blocks: vec![block],
            },
        );
    }

    // The tools a compaction block's `tool_changes` add stand for the system messages it
    // replaced: they stay out of `tools`, as they were while those messages were sent.
    if let Some(block) = turns
        .first()
        .and_then(|t| t.blocks.first())
        .filter(|b| b.compaction)
    {
        for change in block.value["tool_changes"].as_array().into_iter().flatten() {
            let tool = &change["tool"];
            if change["type"] == "tool_addition"
                && let Some(name) = tool["definition"]["name"]
                    .as_str()
                    .or_else(|| tool["name"].as_str())
            {
                natively_added.insert(name.to_owned());
            }
        }
    }
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .filter(|t| !natively_added.contains(&t.name))
        .map(|t| json!({ "name": t.name, "description": t.description, "input_schema": t.input_schema }))
        .collect();

    // The replay rule (crate::replay): the prefix is fed in the order the API reads it, and a
    // reasoning block stays only where the prefix before its turn is the one it was made on.
    // Only a model that binds thinking pays for the digest (it hashes the whole request).
    let mut prefix = options.preserved_thinking.then(Prefix::default);
    if let Some(prefix) = &mut prefix {
        for unit in tools.iter().chain(&system) {
            prefix.push(unit);
        }
    }
    for turn in &mut turns {
        let start = prefix.as_mut().map(|prefix| {
            prefix.push_role(turn.speaker.role());
            prefix.digest()
        });
        let mut dropped = false;
        turn.blocks.retain(|b| match &b.reasoning {
            Some(r) if start.as_deref().is_some_and(|s| !Prefix::keeps(s, r)) => {
                report.dropped_changed += 1;
                report.first_dropped.get_or_insert(b.origin);
                dropped = true;
                false
            }
            Some(_) => {
                report.kept += 1;
                true
            }
            None => true,
        });
        if dropped && turn.blocks.is_empty() {
            // A turn of nothing but invalid thinking: the API refuses an empty message.
            turn.blocks.push(Block {
                value: json!({ "type": "text", "text": "[reasoning not shown]" }),
                origin: usize::MAX,
                attachment: false,
                tool_result: false,
                reasoning: None,
                compaction: false,
            });
        }
        if let Some(prefix) = &mut prefix {
            for block in &turn.blocks {
                prefix.push(&block.value);
            }
        }
    }

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
                .filter(|x| x.reasoning.is_none())
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
                "role": turn.speaker.role(),
                "content": turn.blocks.into_iter().map(|b| b.value).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("max_tokens".into(), json!(options.max_tokens));
    let mut thinking = match &options.thinking {
        Some(Thinking::Budget(budget)) => {
            json!({ "type": "enabled", "budget_tokens": budget })
        }
        Some(Thinking::Adaptive { effort, summarized }) => {
            if let Some(effort) = effort {
                body.insert("output_config".into(), json!({ "effort": effort }));
            }
            if *summarized {
                json!({ "type": "adaptive", "display": "summarized" })
            } else {
                json!({ "type": "adaptive" })
            }
        }
        // Preserved-thinking models think adaptively by default: naming it changes nothing.
        None if options.drop_invalid_thinking => json!({ "type": "adaptive" }),
        None => Value::Null,
    };
    if options.drop_invalid_thinking && thinking.is_object() {
        thinking["block_binding"] = json!({ "prefix_mismatch_behavior": "drop_block" });
    }
    if !thinking.is_null() {
        body.insert("thinking".into(), thinking);
    }
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    (Value::Object(body), report)
}

/// The `anthropic-beta` values a rendered body needs: [`INLINE_TOOLS_BETA`] when it adds a tool
/// inline, [`COMPACTION_BETA`] when it asks for a compaction.
pub fn anthropic_betas(body: &Value) -> Vec<&'static str> {
    let inline = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "system")
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .any(|b| b["type"] == "tool_addition");
    let mut betas = Vec::new();
    if inline {
        betas.push(INLINE_TOOLS_BETA);
    }
    if body.get("compaction").is_some_and(|c| !c.is_null()) {
        betas.push(COMPACTION_BETA);
    }
    betas
}

/// The digest of `body`'s prefix as [`render_anthropic`] feeds it, followed by a new assistant
/// turn: the stamp of the reasoning in the response to `body` (see [`crate::replay`]).
pub(crate) fn anthropic_response_prefix(body: &Value) -> String {
    let list = |value: Option<&Value>| value.and_then(Value::as_array).cloned().unwrap_or_default();
    let mut prefix = Prefix::default();
    for unit in list(body.get("tools"))
        .iter()
        .chain(&list(body.get("system")))
    {
        prefix.push(unit);
    }
    for message in list(body.get("messages")) {
        prefix.push_role(
            message
                .get("role")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        for block in list(message.get("content")) {
            prefix.push(&block);
        }
    }
    prefix.push_role("assistant");
    prefix.digest()
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
        Part::ToolResult { call_id, text, .. } => Some(ishiki_model::framed_result(call_id, text)),
        Part::Reasoning(_) => None,
        Part::Compaction(c) => crate::common::compaction_text(c),
    }
}

fn blocks_of(
    message: &Message,
    origin: usize,
    first_message: usize,
    open_calls: &BTreeSet<String>,
    options: &AnthropicOptions,
    report: &mut ReplayReport,
) -> Vec<Block> {
    let with_text = has_text(&message.content);
    let attachment = message.role == Role::User && is_attachment(&message.id);
    let block = |value: Value, tool_result: bool| Block {
        value,
        origin,
        attachment,
        tool_result,
        reasoning: None,
        compaction: false,
    };
    let mut out = Vec::new();
    for part in &message.content {
        match (message.role, part) {
            (Role::Assistant, Part::Reasoning(r)) if is_own(r, ANTHROPIC, &options.model) => {
                out.push(Block {
                    reasoning: Some(r.clone()),
                    ..block(r.data.clone(), false)
                });
            }
            (_, Part::Reasoning(_)) => report.dropped_foreign += 1,
            // The provider's own compaction goes back verbatim, and only where it wants it:
            // first in the conversation (the context engine puts it there).
            (Role::Assistant, Part::Compaction(c))
                if origin == first_message && is_own_compaction(c, ANTHROPIC, &options.model) =>
            {
                out.push(Block {
                    compaction: true,
                    ..block(c.data.clone(), false)
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
    let message = format!("provider error ({kind}): {message}");
    let kind = if ishiki_model::ModelError::says_too_long(None, &message) {
        ProviderErrorKind::ContextTooLong
    } else {
        ProviderErrorKind::Api
    };
    ProviderError::new(kind, message)
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
    crate::common::check_items(content.len(), "content blocks")?;
    let mut parts = Vec::new();
    for (k, block) in content.iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str).ok_or_else(|| {
            ProviderError::malformed(format!("anthropic content block {k} has no `type`"))
        })?;
        match kind {
            // Each text block stays a part of its own: replayed as received.
            "text" => parts.push(Part::Text {
                text: block
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ProviderError::malformed(format!("anthropic text block {k} has no `text`"))
                    })?
                    .to_owned(),
            }),
            "tool_use" => {
                let field = |name: &str| {
                    block.get(name).and_then(Value::as_str).ok_or_else(|| {
                        ProviderError::malformed(format!(
                            "anthropic tool_use block {k} has no `{name}`"
                        ))
                    })
                };
                parts.push(Part::ToolCall {
                    id: field("id")?.to_owned(),
                    name: field("name")?.to_owned(),
                    input: block.get("input").cloned().unwrap_or_else(|| json!({})),
                });
            }
            // Kept verbatim, in place: the API checks their signatures when they come back.
            "thinking" | "redacted_thinking" => parts.push(Part::Reasoning(Reasoning {
                provider: ANTHROPIC.to_owned(),
                model: model.to_owned(),
                data: block.clone(),
                prefix: None,
            })),
            // The answer to a compaction request: kept verbatim, sent back first later.
            "compaction" => parts.push(Part::Compaction(Compacted {
                provider: ANTHROPIC.to_owned(),
                model: model.to_owned(),
                summary: block
                    .get("content")
                    .and_then(Value::as_str)
                    .filter(|s| !s.trim().is_empty())
                    .map(str::to_owned),
                data: block.clone(),
            })),
            // Server-tool blocks carry nothing the runtime commits.
            _ => {}
        }
    }
    let input_transformations = body
        .get("input_transformations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
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
    Ok(ParsedResponse {
        response: ModelResponse {
            parts,
            usage,
            input_transformations,
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
