//! Local fakes of the Anthropic Messages and OpenAI Responses APIs that *enforce* the rules the
//! providers document, so a test that passes against them proves the request was acceptable:
//!
//! Anthropic (platform.claude.com "Preserved thinking", "Prefix checks", "Mid-conversation
//! system messages", "Adaptive thinking"):
//! - every `thinking` / `redacted_thinking` block it makes carries a signature over its prefix:
//!   `tools`, `system` and everything before the block (earlier messages, earlier blocks of its
//!   own message), `cache_control` markers left out. A block that comes back with a prefix that
//!   differs — an edited or removed earlier message, a block left out or moved before it — is
//!   invalid, and so is every later block: 400 "The block is bound to a different conversation"
//!   unless the request says `prefix_mismatch_behavior: "drop_block"` with the beta header, in
//!   which case they are dropped and listed in `input_transformations`;
//! - roles: the first message is a user message; user and assistant alternate; a system message
//!   stands right after a user turn (or another system message) and before an assistant turn or
//!   at the end;
//! - every `tool_result` answers a `tool_use` of the assistant message just before, and every
//!   `tool_use` followed by a user turn is answered there;
//! - `thinking: {type: "enabled", budget_tokens}` is refused by the adaptive-only families
//!   (Claude 4.7 and later: Opus 4.7/4.8/5/5.5, Sonnet 5/5.5, Fable 5+, Mythos 5+, Haiku 5.5);
//! - compaction (the `compaction_*` errors of `@anthropic-ai/sdk` 1.14, `BetaCompactionConfig`
//!   and `BetaCompactionBlockParam`): a request with `compaction: {type: "summarize"}` needs the
//!   `compact-2026-09-04` beta, takes no `context_management`, `stop_sequences` or output
//!   format, must not end on an unfinished assistant turn and must hold something to
//!   summarize; it is answered with one signed `compaction` block alone (`stop_reason`
//!   `compaction`). A later request sends that block back first in the conversation, in an
//!   assistant message, unchanged (its `content`, `encrypted_content`, `signature` and
//!   `tool_changes`); a second block with content, a block elsewhere, an edited content or
//!   a bad signature is refused. The block's `tool_changes` hold the tools the compacted range
//!   added, so a tool both in them and in `tools` (or added again) is a name conflict.
//!
//! Responses: a `reasoning` item must be followed by the item that followed it when it was made
//! ("Item 'rs_…' of type 'reasoning' was provided without its required following item");
//! `POST /responses/compact` (`ResponseCompactParams`: no tools) answers the input's user
//! messages then one `compaction` item (`CompactedResponse`), and a later input may carry one
//! compaction item, one the fake made, with its `encrypted_content` unchanged.
//!
//! The fakes answer what a scripted closure says, and count what they saw.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const SECRET: &str = "fake-provider-signing-key";

/// Removes `cache_control` from an object (a block, a tool, a system block).
fn unmarked(value: &Value) -> Value {
    let mut value = value.clone();
    if let Some(object) = value.as_object_mut() {
        object.remove("cache_control");
    }
    value
}

/// The signature of a thinking block whose prefix is `prefix` (a canonical JSON document).
fn sign(prefix: &Value) -> String {
    let mut hash = Sha256::new();
    hash.update(SECRET.as_bytes());
    hash.update(prefix.to_string().as_bytes());
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn content_of(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::String(text)) => vec![json!({ "type": "text", "text": text })],
        Some(Value::Array(blocks)) => blocks.iter().map(unmarked).collect(),
        _ => Vec::new(),
    }
}

/// The canonical prefix of block `block` of message `message` in `body`.
fn prefix_of(body: &Value, messages: &[Value], message: usize, block: usize) -> Value {
    let list = |key: &str| -> Vec<Value> {
        match body.get(key) {
            Some(Value::Array(items)) => items.iter().map(unmarked).collect(),
            Some(Value::String(text)) => vec![json!({ "type": "text", "text": text })],
            _ => Vec::new(),
        }
    };
    let mut before: Vec<Value> = messages[..message]
        .iter()
        .map(|m| json!({ "role": m["role"], "content": content_of(m) }))
        .collect();
    let own: Vec<Value> = content_of(&messages[message])[..block].to_vec();
    before.push(json!({ "role": messages[message]["role"], "content": own }));
    json!({ "tools": list("tools"), "system": list("system"), "messages": before })
}

fn is_thinking(block: &Value) -> bool {
    matches!(
        block["type"].as_str(),
        Some("thinking" | "redacted_thinking")
    )
}

/// The adaptive-only families (they refuse `budget_tokens`).
fn adaptive_only(model: &str) -> bool {
    [
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-opus-5",
        "claude-sonnet-5",
        "claude-fable-5",
        "claude-mythos-5",
        "claude-haiku-5-5",
    ]
    .iter()
    .any(|family| model.starts_with(family))
}

/// What one checked request carried.
#[derive(Debug, Clone, Default)]
pub(crate) struct Checked {
    /// Thinking blocks that passed the prefix check.
    pub(crate) thinking_valid: usize,
    /// Thinking blocks dropped under `drop_block`.
    pub(crate) thinking_dropped: usize,
    /// The request's canonical text in cache order (tools, system, messages), markers removed.
    pub(crate) layout: String,
}

/// The beta a compaction request needs.
pub(crate) const COMPACT_BETA: &str = "compact-2026-09-04";

/// The signature of a compaction block: one part over what only the server reads
/// (`encrypted_content`, `tool_changes`), one over the readable `content`, so an edited
/// summary and a forged block get their own errors.
fn sign_compaction(block: &Value) -> String {
    let opaque = json!({ "encrypted_content": block["encrypted_content"],
        "tool_changes": block["tool_changes"] });
    format!("cmp-{}-{}", sign(&opaque), sign(&block["content"]))
}

/// The names a `tool_addition` block makes available.
fn added_name(block: &Value) -> Option<String> {
    let tool = &block["tool"];
    tool["definition"]["name"]
        .as_str()
        .or_else(|| tool["name"].as_str())
        .map(str::to_owned)
}

/// The compaction rules (see the module docs) for a request's messages.
fn check_compaction(body: &Value, messages: &[Value], beta: &str) -> Result<(), String> {
    let mut with_content = 0;
    for (i, m) in messages.iter().enumerate() {
        for (j, block) in content_of(m).iter().enumerate() {
            if block["type"] != "compaction" {
                continue;
            }
            if block["content"].is_null() {
                // A failed compaction round-tripped: the server treats it as a no-op.
                continue;
            }
            if block["content"] == "" {
                return Err(format!(
                    "messages.{i}.content.{j}.content: empty string content is not allowed"
                ));
            }
            with_content += 1;
            if with_content > 1 {
                return Err(format!(
                    "compaction_block_ambiguous: messages.{i}.content.{j}: `messages` holds more than one `compaction` block with content. Send only the block the conversation returned last."
                ));
            }
            if (i, j) != (0, 0) || m["role"] != "assistant" {
                return Err(format!(
                    "compaction_block_misplaced: messages.{i}.content.{j}: the `compaction` block is not the first block of the conversation, or is in a `system` message"
                ));
            }
            let signature = block["signature"].as_str().unwrap_or_default();
            let expected = sign_compaction(block);
            let opaque_part = |s: &str| s.rsplit_once('-').map(|(head, _)| head.to_owned());
            if signature != expected {
                return Err(if opaque_part(signature) == opaque_part(&expected) {
                    format!(
                        "compaction_content_mismatch: messages.{i}.content.{j}: the `compaction` block's `content` differs from the text its `signature` recorded"
                    )
                } else {
                    format!(
                        "compaction_signature_invalid: messages.{i}.content.{j}: the `compaction` block's `signature` does not verify"
                    )
                });
            }
        }
    }
    // One name, one tool: `tools`, the compaction's tool changes and later additions.
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    for m in messages {
        for block in content_of(m) {
            let additions: Vec<Value> = match block["type"].as_str() {
                Some("compaction") => block["tool_changes"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                Some("tool_addition") => vec![block.clone()],
                _ => Vec::new(),
            };
            for addition in additions.iter().filter(|a| a["type"] == "tool_addition") {
                if let Some(name) = added_name(addition) {
                    if names.contains(&name) {
                        return Err(format!(
                            "tool_name_conflict: the tool `{name}` made available in `messages` takes a name that an available tool already holds"
                        ));
                    }
                    names.push(name);
                }
            }
        }
    }
    if body.get("compaction").is_none_or(Value::is_null) {
        return Ok(());
    }
    if !beta.contains(COMPACT_BETA) {
        return Err("compaction: Extra inputs are not permitted".into());
    }
    if body["compaction"]["type"] != "summarize" {
        return Err("compaction.type: Input should be 'summarize'".into());
    }
    for key in ["context_management", "stop_sequences", "output_format"] {
        if body.get(key).is_some() {
            return Err(format!(
                "{key}: cannot be combined with `compaction` (a compaction request returns no reply)"
            ));
        }
    }
    if body["output_config"].get("format").is_some() {
        return Err(
            "output_config.format: cannot be combined with `compaction` (a compaction request returns no reply)"
                .into(),
        );
    }
    if let Some(last) = messages.last()
        && last["role"] == "assistant"
        && content_of(last).iter().any(|b| b["type"] == "tool_use")
    {
        return Err(
            "compaction_incomplete_turn: the compaction request ends on an `assistant` turn that is not finished"
                .into(),
        );
    }
    let something = messages
        .iter()
        .any(|m| m["role"] != "system" && content_of(m).iter().any(|b| b["type"] != "compaction"));
    if !something {
        return Err(
            "compaction_nothing_to_summarize: `messages` holds no `user` or `assistant` content to summarize or adopt"
                .into(),
        );
    }
    Ok(())
}

/// The fake's answer to a compaction request: one signed block that names how many messages
/// it summarizes and carries the tools the range added as its `tool_changes`.
pub(crate) fn compaction_answer(body: &Value, n: usize) -> Value {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut changes: Vec<Value> = Vec::new();
    for m in &messages {
        for block in content_of(m) {
            match block["type"].as_str() {
                Some("compaction") => {
                    changes.extend(
                        block["tool_changes"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default(),
                    );
                }
                Some("tool_addition") => changes.push(block.clone()),
                _ => {}
            }
        }
    }
    let mut block = json!({ "type": "compaction",
        "content": format!("Summary {n}: {} messages of work so far.", messages.len()),
        "encrypted_content": format!("enc-compaction-{n}"),
        "tool_changes": changes });
    block["signature"] = json!(sign_compaction(&block));
    block
}

/// Checks a Messages request as the API does; `Err` is the 400 message.
pub(crate) fn check_anthropic(body: &Value, beta: &str) -> Result<(Checked, Vec<Value>), String> {
    let model = body["model"].as_str().unwrap_or_default();
    let thinking = &body["thinking"];
    if thinking["type"] == "enabled" && adaptive_only(model) {
        return Err(format!(
            "thinking.type.enabled is not supported for this model. Use thinking.type.adaptive and output_config.effort to control thinking behavior ({model})"
        ));
    }
    let binding = &thinking["block_binding"];
    if !binding.is_null() && !beta.contains("thinking-binding-controls-2026-08-01") {
        return Err("thinking.block_binding: Extra inputs are not permitted".into());
    }
    let drop_block = binding["prefix_mismatch_behavior"] == "drop_block";
    let messages = body["messages"]
        .as_array()
        .ok_or("messages: Field required")?;
    // Roles and placement.
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        let previous = i
            .checked_sub(1)
            .map(|p| messages[p]["role"].as_str().unwrap_or_default());
        match (role, previous) {
            ("user", None) => {}
            // A compaction block opens the conversation in an assistant message.
            ("assistant", None)
                if content_of(m)
                    .first()
                    .is_some_and(|b| b["type"] == "compaction") => {}
            (_, None) => {
                return Err(format!(
                    "messages.0: the first message must use the user role, not {role}"
                ));
            }
            ("user", Some("assistant")) | ("assistant", Some("user" | "system")) => {}
            ("system", Some("user" | "system")) => {
                let next = messages[i + 1..].iter().find(|n| n["role"] != "system");
                if next.is_some_and(|n| n["role"] != "assistant") {
                    return Err(format!(
                        "messages.{i}: a system message must precede an assistant turn or end the messages"
                    ));
                }
            }
            (role, Some(previous)) => {
                return Err(format!(
                    "messages.{i}: roles must alternate between user and assistant ({previous} then {role})"
                ));
            }
        }
        if content_of(m).is_empty() {
            return Err(format!(
                "messages.{i}: all messages must have non-empty content"
            ));
        }
        for (j, block) in content_of(m).iter().enumerate() {
            if block["type"] == "text" && block["text"].as_str().is_some_and(str::is_empty) {
                return Err(format!(
                    "messages.{i}.content.{j}: text content blocks must be non-empty"
                ));
            }
        }
    }
    check_compaction(body, messages, beta)?;
    // tool_use / tool_result pairing.
    for (i, m) in messages.iter().enumerate() {
        let ids = |m: &Value, kind: &str, key: &str| -> Vec<String> {
            content_of(m)
                .iter()
                .filter(|b| b["type"] == kind)
                .filter_map(|b| b[key].as_str().map(str::to_owned))
                .collect()
        };
        if m["role"] == "user" {
            let open = i
                .checked_sub(1)
                .map(|p| ids(&messages[p], "tool_use", "id"))
                .unwrap_or_default();
            for id in ids(m, "tool_result", "tool_use_id") {
                if !open.contains(&id) {
                    return Err(format!(
                        "messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    ));
                }
            }
        }
        if m["role"] == "assistant"
            && let Some(next) = messages.get(i + 1)
        {
            let answered = ids(next, "tool_result", "tool_use_id");
            for id in ids(m, "tool_use", "id") {
                if !answered.contains(&id) {
                    return Err(format!(
                        "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}"
                    ));
                }
            }
        }
    }
    // Tool changes: only in system messages; an inline definition needs its beta header.
    // (Whether the API checks an earlier `tool_use` name against the tools is not documented,
    // so the fake does not.)
    for (i, m) in messages.iter().enumerate() {
        for (j, block) in content_of(m).iter().enumerate() {
            let kind = block["type"].as_str();
            if !matches!(kind, Some("tool_addition" | "tool_removal")) {
                continue;
            }
            if m["role"] != "system" {
                return Err(format!(
                    "messages.{i}.content.{j}: tool changes are only allowed in system messages"
                ));
            }
            if block["tool"]["type"] == "tool_definition"
                && !beta.contains("inline-tools-2026-09-15")
            {
                return Err(format!(
                    "messages.{i}.content.{j}.tool: tool_definition requires the `inline-tools-2026-09-15` beta"
                ));
            }
        }
    }
    // The prefix check: the first invalid block invalidates every later one.
    let mut checked = Checked::default();
    let mut transformations = Vec::new();
    let mut invalid = false;
    for (i, m) in messages.iter().enumerate() {
        for (j, block) in content_of(m).iter().enumerate() {
            if !is_thinking(block) {
                continue;
            }
            let signature = block["signature"]
                .as_str()
                .or_else(|| block["data"].as_str())
                .unwrap_or_default();
            let valid = !invalid && signature.ends_with(&sign(&prefix_of(body, messages, i, j)));
            if valid {
                checked.thinking_valid += 1;
                continue;
            }
            invalid = true;
            if !drop_block {
                return Err(format!(
                    "messages.{i}.content.{j}: Invalid `signature` in `thinking` block. The block is bound to a different conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\"."
                ));
            }
            checked.thinking_dropped += 1;
            transformations.push(json!({ "type": "thinking_dropped",
                "path": format!("messages.{i}.content.{j}"), "reason": "prefix_binding_mismatch" }));
        }
    }
    let mut layout = String::new();
    for key in ["tools", "system"] {
        for item in body[key].as_array().into_iter().flatten() {
            layout.push_str(&unmarked(item).to_string());
            layout.push('\n');
        }
    }
    for m in messages {
        layout.push_str(m["role"].as_str().unwrap_or_default());
        layout.push('\n');
        for block in content_of(m) {
            layout.push_str(&block.to_string());
            layout.push('\n');
        }
    }
    checked.layout = layout;
    Ok((checked, transformations))
}

/// Signs the thinking blocks of `content`, the answer to `body`.
pub(crate) fn sign_answer(body: &Value, content: &mut [Value]) {
    let mut messages = body["messages"].as_array().cloned().unwrap_or_default();
    messages.push(json!({ "role": "assistant", "content": [] }));
    for j in 0..content.len() {
        if is_thinking(&content[j]) {
            let last = messages.len() - 1;
            messages[last]["content"] = Value::Array(content[..j].to_vec());
            let signature = format!("sig-{}", sign(&prefix_of(body, &messages, last, j)));
            let key = if content[j]["type"] == "thinking" {
                "signature"
            } else {
                "data"
            };
            content[j][key] = json!(signature);
        }
    }
}

/// The Responses rule: every reasoning item is followed by the item that followed it when it
/// was made (recorded by `remember`).
#[derive(Debug, Default)]
pub(crate) struct ResponsesRule {
    followers: BTreeMap<String, Value>,
    /// The `encrypted_content` of every compaction item made.
    compactions: Vec<String>,
}

impl ResponsesRule {
    pub(crate) fn remember(&mut self, output: &[Value]) {
        for pair in output.windows(2) {
            if pair[0]["type"] == "reasoning" {
                self.followers.insert(
                    pair[0]["id"].as_str().unwrap_or_default().to_owned(),
                    comparable(&pair[1]),
                );
            }
        }
    }

    /// The answer to `POST /responses/compact`: the input's user messages, then one item.
    pub(crate) fn compact(&mut self, body: &Value, n: usize) -> Result<Vec<Value>, String> {
        if body.get("tools").is_some() {
            return Err("tools: Extra inputs are not permitted".into());
        }
        self.check(body)?;
        let input = body["input"].as_array().ok_or("input: Field required")?;
        let mut output: Vec<Value> = input
            .iter()
            .filter(|i| i["type"] == "message" && i["role"] == "user")
            .cloned()
            .collect();
        let encrypted = format!("cmp-enc-{n}");
        self.compactions.push(encrypted.clone());
        output.push(json!({ "type": "compaction", "id": format!("cmp_{n}"),
            "encrypted_content": encrypted }));
        Ok(output)
    }

    pub(crate) fn check(&self, body: &Value) -> Result<usize, String> {
        let input = body["input"].as_array().ok_or("input: Field required")?;
        let compactions: Vec<&Value> = input.iter().filter(|i| i["type"] == "compaction").collect();
        if compactions.len() > 1 {
            return Err("input: more than one compaction item; send the latest only".into());
        }
        for item in compactions {
            let encrypted = item["encrypted_content"].as_str().unwrap_or_default();
            if !self.compactions.iter().any(|c| c == encrypted) {
                return Err(format!(
                    "Invalid 'encrypted_content' in compaction item {}",
                    item["id"]
                ));
            }
        }
        let mut reasoning = 0;
        for (k, item) in input.iter().enumerate() {
            if item["type"] != "reasoning" {
                continue;
            }
            reasoning += 1;
            let id = item["id"].as_str().unwrap_or_default();
            let expected = self.followers.get(id);
            let next = input.get(k + 1).map(comparable);
            if expected.is_none() || next.as_ref() != expected {
                return Err(format!(
                    "Item '{id}' of type 'reasoning' was provided without its required following item."
                ));
            }
        }
        Ok(reasoning)
    }
}

/// An output item as it comes back as input (ids and statuses are not sent back).
fn comparable(item: &Value) -> Value {
    match item["type"].as_str() {
        Some("function_call") => json!({ "type": "function_call", "call_id": item["call_id"] }),
        Some("message") => {
            let text: String = item["content"]
                .as_array()
                .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
                .or_else(|| item["content"].as_str().map(str::to_owned))
                .unwrap_or_default();
            json!({ "type": "message", "text": text })
        }
        _ => item.clone(),
    }
}

/// What a fake saw, for the test's figures.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) requests: usize,
    pub(crate) rejected: Vec<String>,
    pub(crate) thinking_valid: usize,
    pub(crate) thinking_dropped: usize,
    pub(crate) layouts: Vec<String>,
    pub(crate) bodies: Vec<Value>,
    /// The compaction blocks the fake made, in order.
    pub(crate) compactions: Vec<Value>,
}

/// The scripted answer to the `n`-th request: the content blocks (Anthropic) or output items
/// (Responses).
pub(crate) type Script = Box<dyn FnMut(usize, &Value) -> Vec<Value> + Send>;

/// Which API a fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    Anthropic,
    Responses,
}

/// Starts a fake on 127.0.0.1; it serves until the test ends.
pub(crate) async fn start(api: Api, mut script: Script) -> (String, Arc<Mutex<Log>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Log::default()));
    let seen = log.clone();
    let mut rule = ResponsesRule::default();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let Some((head, body)) = read_request(&mut socket).await else {
                continue;
            };
            let beta = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("anthropic-beta")
                        .then(|| v.trim().to_owned())
                })
                .unwrap_or_default();
            let (status, answer) = {
                let mut log = seen.lock().unwrap();
                log.requests += 1;
                let n = log.requests;
                log.bodies.push(body.clone());
                match api {
                    Api::Anthropic => match check_anthropic(&body, &beta) {
                        Err(message) => {
                            log.rejected.push(message.clone());
                            (
                                400,
                                json!({ "type": "error", "error": { "type": "invalid_request_error", "message": message } }),
                            )
                        }
                        Ok((checked, _))
                            if body.get("compaction").is_some_and(|c| !c.is_null()) =>
                        {
                            log.thinking_valid += checked.thinking_valid;
                            let block = compaction_answer(&body, n);
                            log.compactions.push(block.clone());
                            (
                                200,
                                json!({ "id": format!("msg_{n}"), "type": "message", "role": "assistant",
                                "model": body["model"], "content": [block],
                                "stop_reason": "compaction",
                                "usage": { "input_tokens": 10, "output_tokens": 5 } }),
                            )
                        }
                        Ok((checked, transformations)) => {
                            log.thinking_valid += checked.thinking_valid;
                            log.thinking_dropped += checked.thinking_dropped;
                            log.layouts.push(checked.layout);
                            let mut content = script(n, &body);
                            sign_answer(&body, &mut content);
                            let calls = content.iter().any(|b| b["type"] == "tool_use");
                            (
                                200,
                                json!({ "id": format!("msg_{n}"), "type": "message", "role": "assistant",
                                "model": body["model"], "content": content,
                                "stop_reason": if calls { "tool_use" } else { "end_turn" },
                                "input_transformations": transformations,
                                "usage": { "input_tokens": 10, "output_tokens": 5 } }),
                            )
                        }
                    },
                    Api::Responses if head.starts_with("POST /responses/compact") => {
                        match rule.compact(&body, n) {
                            Err(message) => {
                                log.rejected.push(message.clone());
                                (
                                    400,
                                    json!({ "error": { "type": "invalid_request_error", "message": message } }),
                                )
                            }
                            Ok(output) => {
                                log.compactions.push(Value::Array(output.clone()));
                                (
                                    200,
                                    json!({ "id": format!("cmp_{n}"), "object": "response.compaction",
                                    "created_at": 0, "model": body["model"], "output": output,
                                    "usage": { "input_tokens": 10, "output_tokens": 5 } }),
                                )
                            }
                        }
                    }
                    Api::Responses => match rule.check(&body) {
                        Err(message) => {
                            log.rejected.push(message.clone());
                            (
                                400,
                                json!({ "error": { "type": "invalid_request_error", "message": message, "param": "input" } }),
                            )
                        }
                        Ok(reasoning) => {
                            log.thinking_valid += reasoning;
                            let output = script(n, &body);
                            rule.remember(&output);
                            (
                                200,
                                json!({ "id": format!("resp_{n}"), "object": "response", "status": "completed",
                                "model": body["model"], "output": output,
                                "usage": { "input_tokens": 10, "output_tokens": 5 } }),
                            )
                        }
                    },
                }
            };
            let text = answer.to_string();
            let response = format!(
                "HTTP/1.1 {status} Fake\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (url, log)
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<(String, Value)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 65536];
    let (head, length) = loop {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())
                        .flatten()
                })
                .unwrap_or(0usize);
            data.drain(..end + 4);
            break (head, length);
        }
    };
    while data.len() < length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
    Some((head, serde_json::from_slice(&data).ok()?))
}

#[test]
fn the_fake_refuses_a_changed_prefix_and_drops_under_drop_block() {
    let mut body = json!({ "model": "claude-fable-5-2", "max_tokens": 10,
        "system": [{ "type": "text", "text": "rules" }],
        "messages": [{ "role": "user", "content": [{ "type": "text", "text": "hi" }] }] });
    let mut answer = vec![
        json!({ "type": "thinking", "thinking": "", "signature": "" }),
        json!({ "type": "text", "text": "hello" }),
    ];
    sign_answer(&body, &mut answer);
    body["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "role": "assistant", "content": answer }));
    body["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "role": "user", "content": "more" }));
    let (checked, _) = check_anthropic(&body, "").expect("unchanged prefix");
    assert_eq!(checked.thinking_valid, 1);
    // A cache marker is not a change.
    body["messages"][0]["content"][0]["cache_control"] = json!({ "type": "ephemeral" });
    assert!(check_anthropic(&body, "").is_ok());
    // An edit before the block is.
    body["messages"][0]["content"][0]["text"] = json!("hi!");
    let error = check_anthropic(&body, "").expect_err("changed prefix");
    assert!(
        error.contains("bound to a different conversation"),
        "{error}"
    );
    body["thinking"] = json!({ "type": "adaptive",
        "block_binding": { "prefix_mismatch_behavior": "drop_block" } });
    assert!(
        check_anthropic(&body, "").is_err(),
        "block_binding needs the beta header"
    );
    let (checked, transformations) =
        check_anthropic(&body, "thinking-binding-controls-2026-08-01").expect("dropped");
    assert_eq!((checked.thinking_valid, checked.thinking_dropped), (0, 1));
    assert_eq!(transformations[0]["path"], "messages.1.content.0");
    body["thinking"] = json!({ "type": "enabled", "budget_tokens": 1024 });
    assert!(check_anthropic(&body, "").unwrap_err().contains("adaptive"));
}
