//! Streaming: a server-sent-events reader and, per API, an assembler that turns the stream's
//! events back into the body the API would have sent without streaming.
//!
//! [`SseReader`] takes bytes as they come (frames may split anywhere, even inside a UTF-8
//! character or a `\r\n`), skips `:` comments (keep-alives) and yields complete events.
//! [`StreamAssembler`] consumes them for one [`Protocol`]: it hands text and tool-call starts to
//! a callback as they arrive and, at the end, builds the non-streaming response body, so the
//! same parser makes the same [`ModelResponse`](ishiki_model::ModelResponse) either way. A stream
//! that ends before the API's end event is an error the caller retries: nothing half-received is
//! ever committed.
//!
//! Bounds: a line may hold at most [`MAX_LINE_BYTES`], a stream at most [`MAX_STREAM_BYTES`],
//! and a response at most [`MAX_STREAM_ITEMS`] content blocks or tool calls.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::error::{ProviderError, ProviderErrorKind};
use crate::http::Protocol;

/// The longest line an event stream may send.
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// The most bytes one streamed response may take.
pub const MAX_STREAM_BYTES: usize = 64 << 20;
/// The most content blocks, output items or tool calls one streamed response may have.
pub const MAX_STREAM_ITEMS: usize = 1024;

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// An incremental server-sent-events parser (the WHATWG event-stream format, lines ending in
/// `\n` or `\r\n`).
#[derive(Debug, Default)]
pub struct SseReader {
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no line end (a long line arrives in many pushes:
    /// scanning it again from its start each time would be quadratic).
    scanned: usize,
    event: Option<String>,
    data: Option<String>,
    total: usize,
}

impl SseReader {
    /// A reader at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, ProviderError> {
        self.total = self.total.saturating_add(bytes.len());
        if self.total > MAX_STREAM_BYTES {
            return Err(ProviderError::malformed(format!(
                "the event stream is larger than {MAX_STREAM_BYTES} bytes"
            )));
        }
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(end) = self.pending[from..].iter().position(|&b| b == b'\n') {
            let end = from + end;
            let mut line = &self.pending[start..end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            let line = String::from_utf8_lossy(line).into_owned();
            start = end + 1;
            from = start;
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        self.pending.drain(..start);
        self.scanned = self.pending.len();
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(ProviderError::malformed(format!(
                "an event stream line is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(events)
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let data = self.data.take();
            let event = self.event.take();
            return data.map(|data| SseEvent { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }
}

/// What a stream shows while it arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// More answer text.
    Text(String),
    /// More reasoning a person may read: an Anthropic thinking summary, a Responses reasoning
    /// summary. Not part of the answer.
    Reasoning(String),
    /// A tool call started (its input is still arriving).
    ToolCall {
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
    },
    /// The stream broke and the request starts again: what arrived so far is void.
    Retry {
        /// Why.
        reason: String,
    },
}

#[derive(Debug, Default)]
struct ChatCall {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

#[derive(Debug, Default)]
struct AnthropicBlock {
    block: Map<String, Value>,
    /// `input_json_delta` fragments of a `tool_use` block.
    json: String,
    /// `text`, `thinking` and `signature` deltas, appended in place and written into the block
    /// at its end (copying the block's text for every delta would be quadratic).
    pieces: BTreeMap<&'static str, String>,
}

impl AnthropicBlock {
    /// The block as the API would have sent it whole.
    fn into_value(mut self) -> Value {
        for (key, piece) in self.pieces {
            let mut text = self
                .block
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            text.push_str(&piece);
            self.block.insert(key.to_owned(), Value::String(text));
        }
        if self.block.get("type").and_then(Value::as_str) == Some("tool_use") {
            if !self.json.trim().is_empty() {
                // What the official SDK assembles: the input object, completed the way its
                // partial-JSON parser completes a call cut by `max_tokens`, or `{}`; the API
                // takes only an object back.
                let input = serde_json::from_str::<Value>(&self.json)
                    .ok()
                    .or_else(|| crate::partial_json::complete(&self.json))
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                self.block.insert("input".into(), input);
            } else if !self.block.get("input").is_some_and(Value::is_object) {
                self.block.insert("input".into(), json!({}));
            }
        }
        Value::Object(self.block)
    }
}

/// Rebuilds one API's response body from its event stream.
#[derive(Debug)]
pub struct StreamAssembler {
    protocol: Protocol,
    reader: SseReader,
    done: bool,
    // Chat Completions
    text: String,
    refusal: String,
    calls: BTreeMap<u64, ChatCall>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    // Anthropic Messages
    message: Option<Map<String, Value>>,
    blocks: BTreeMap<u64, AnthropicBlock>,
    // Responses
    items: BTreeMap<u64, Value>,
    response: Option<Value>,
}

fn bad(protocol: Protocol, what: impl std::fmt::Display) -> ProviderError {
    ProviderError::malformed(format!("{} stream: {what}", protocol.name()))
}

impl StreamAssembler {
    /// An assembler for one response of `protocol`.
    pub fn new(protocol: Protocol) -> Self {
        Self {
            protocol,
            reader: SseReader::new(),
            done: false,
            text: String::new(),
            refusal: String::new(),
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: None,
            message: None,
            blocks: BTreeMap::new(),
            items: BTreeMap::new(),
            response: None,
        }
    }

    /// Feeds the next bytes of the stream, calling `on_event` for text and tool-call starts.
    pub fn push(
        &mut self,
        bytes: &[u8],
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), ProviderError> {
        for event in self.reader.push(bytes)? {
            if self.done {
                continue;
            }
            match self.protocol {
                Protocol::OpenAi => self.chat(&event, on_event)?,
                Protocol::Anthropic => self.anthropic(&event, on_event)?,
                Protocol::OpenAiResponses => self.responses(&event, on_event)?,
            }
        }
        Ok(())
    }

    /// Whether the API's end event arrived.
    pub fn is_complete(&self) -> bool {
        self.done
    }

    /// Whether the stream reached its end as the official SDKs judge it: the end event, or for
    /// Chat Completions a finish reason (the SDK does not need `data: [DONE]`).
    fn ended(&self) -> bool {
        self.done || (self.protocol == Protocol::OpenAi && self.finish_reason.is_some())
    }

    /// The response body the API would have sent without streaming. A stream that ended before
    /// its end event is a [`ProviderErrorKind::Transport`] error (worth a retry).
    pub fn finish(self) -> Result<Value, ProviderError> {
        if !self.ended() {
            return Err(ProviderError::new(
                ProviderErrorKind::Transport,
                format!(
                    "the {} stream ended before the response was complete",
                    self.protocol.name()
                ),
            ));
        }
        Ok(match self.protocol {
            Protocol::OpenAi => {
                let calls: Vec<Value> = self
                    .calls
                    .into_values()
                    .map(|c| {
                        json!({ "id": c.id, "type": "function",
                            "function": { "name": c.name, "arguments": c.arguments } })
                    })
                    .collect();
                let mut message = json!({ "role": "assistant",
                    "content": if self.text.is_empty() { Value::Null } else { json!(self.text) } });
                if !self.refusal.is_empty() {
                    message["refusal"] = json!(self.refusal);
                }
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                let mut body = json!({ "object": "chat.completion", "choices": [{ "index": 0,
                    "finish_reason": self.finish_reason, "message": message }] });
                if let Some(usage) = self.usage {
                    body["usage"] = usage;
                }
                body
            }
            Protocol::Anthropic => {
                let mut message = self.message.unwrap_or_default();
                let content: Vec<Value> = self
                    .blocks
                    .into_values()
                    .map(AnthropicBlock::into_value)
                    .collect();
                message.insert("content".into(), Value::Array(content));
                Value::Object(message)
            }
            Protocol::OpenAiResponses => {
                let mut response = self.response.unwrap_or_else(|| json!({}));
                let empty = response
                    .get("output")
                    .and_then(Value::as_array)
                    .is_none_or(Vec::is_empty);
                if empty && !self.items.is_empty() {
                    response["output"] = Value::Array(self.items.into_values().collect());
                }
                response
            }
        })
    }

    fn json(&self, event: &SseEvent) -> Result<Value, ProviderError> {
        crate::common::parse_json(&event.data)
            .map_err(|e| bad(self.protocol, format_args!("an event is not json: {e}")))
    }

    fn chat(
        &mut self,
        event: &SseEvent,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), ProviderError> {
        if event.data.trim() == "[DONE]" {
            // Servers that send no finish reason still end here.
            self.done = true;
            return Ok(());
        }
        let chunk = self.json(event)?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(crate::anthropic::api_error(error));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.text.push_str(text);
            on_event(StreamEvent::Text(text.to_owned()));
        }
        if let Some(text) = delta.get("refusal").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.refusal.push_str(text);
            on_event(StreamEvent::Text(text.to_owned()));
        }
        for (k, call) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or(k as u64);
            if !self.calls.contains_key(&index) && self.calls.len() >= MAX_STREAM_ITEMS {
                return Err(bad(
                    self.protocol,
                    format_args!("more than {MAX_STREAM_ITEMS} tool calls"),
                ));
            }
            let entry = self.calls.entry(index).or_default();
            let text = |key: &str| {
                call.get(key)
                    .or_else(|| call.get("function").and_then(|f| f.get(key)))
                    .and_then(Value::as_str)
            };
            // As the official SDK does: id and name are assigned (servers repeat them in every
            // chunk), only the arguments are appended.
            if let Some(id) = text("id").filter(|id| !id.is_empty()) {
                id.clone_into(&mut entry.id);
            }
            if let Some(name) = text("name").filter(|name| !name.is_empty()) {
                name.clone_into(&mut entry.name);
            }
            if let Some(arguments) = text("arguments") {
                entry.arguments.push_str(arguments);
            }
            if !entry.announced && !entry.id.is_empty() && !entry.name.is_empty() {
                entry.announced = true;
                on_event(StreamEvent::ToolCall {
                    id: entry.id.clone(),
                    name: entry.name.clone(),
                });
            }
        }
        Ok(())
    }

    fn anthropic(
        &mut self,
        event: &SseEvent,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), ProviderError> {
        let data = self.json(event)?;
        let kind = event_kind(&data, event);
        let index = data.get("index").and_then(Value::as_u64);
        match kind.as_str() {
            "message_start" => {
                let message = data
                    .get("message")
                    .and_then(Value::as_object)
                    .ok_or_else(|| bad(self.protocol, "message_start has no `message`"))?;
                self.message = Some(message.clone());
            }
            "content_block_start" => {
                let index = index.ok_or_else(|| bad(self.protocol, "a block has no `index`"))?;
                if self.blocks.len() >= MAX_STREAM_ITEMS {
                    return Err(bad(
                        self.protocol,
                        format_args!("more than {MAX_STREAM_ITEMS} content blocks"),
                    ));
                }
                if self.blocks.contains_key(&index) {
                    // Announcing a second block at one index would show calls that never run.
                    return Err(bad(
                        self.protocol,
                        format_args!("content block {index} started twice"),
                    ));
                }
                let block = data
                    .get("content_block")
                    .and_then(Value::as_object)
                    .ok_or_else(|| bad(self.protocol, "a block start has no `content_block`"))?
                    .clone();
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let field = |k: &str| {
                        block
                            .get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    on_event(StreamEvent::ToolCall {
                        id: field("id"),
                        name: field("name"),
                    });
                }
                if let Some(text) = block.get("text").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    on_event(StreamEvent::Text(text.to_owned()));
                }
                self.blocks.insert(
                    index,
                    AnthropicBlock {
                        block,
                        ..AnthropicBlock::default()
                    },
                );
            }
            "content_block_delta" => {
                let protocol = self.protocol;
                let block = index
                    .and_then(|i| self.blocks.get_mut(&i))
                    .ok_or_else(|| bad(protocol, "a delta for a block that did not start"))?;
                let delta = data.get("delta").cloned().unwrap_or_default();
                let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
                let mut append = |key: &'static str, text: &str| {
                    block.pieces.entry(key).or_default().push_str(text);
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = piece("text");
                        append("text", text);
                        if !text.is_empty() {
                            on_event(StreamEvent::Text(text.to_owned()));
                        }
                    }
                    Some("input_json_delta") => block.json.push_str(piece("partial_json")),
                    Some("thinking_delta") => {
                        let text = piece("thinking");
                        append("thinking", text);
                        if !text.is_empty() {
                            on_event(StreamEvent::Reasoning(text.to_owned()));
                        }
                    }
                    // The official SDK replaces the signature: a later delta is the whole of it.
                    Some("signature_delta") => {
                        block.pieces.remove("signature");
                        block.block.insert(
                            "signature".into(),
                            Value::String(piece("signature").to_owned()),
                        );
                    }
                    // As in the official SDK, a compaction delta carries the block's final
                    // value (a `null` content is a failed compaction): assigned, not appended.
                    Some("compaction_delta") => {
                        block.pieces.remove("content");
                        for key in ["content", "encrypted_content"] {
                            if let Some(value) = delta.get(key) {
                                block.block.insert(key.into(), value.clone());
                            }
                        }
                    }
                    // Citations and future delta kinds do not change what the runtime commits.
                    _ => {}
                }
            }
            // The block is finished when the message is (`AnthropicBlock::into_value`).
            "content_block_stop" => {}
            "message_delta" => {
                let message = self
                    .message
                    .as_mut()
                    .ok_or_else(|| bad(self.protocol, "message_delta before message_start"))?;
                if let Some(Value::Object(delta)) = data.get("delta") {
                    for (k, v) in delta {
                        message.insert(k.clone(), v.clone());
                    }
                }
                if let Some(Value::Object(usage)) = data.get("usage") {
                    let entry = message
                        .entry("usage")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(total) = entry {
                        for (k, v) in usage.iter().filter(|(_, v)| !v.is_null()) {
                            total.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            "message_stop" => {
                if self.message.is_none() {
                    return Err(bad(self.protocol, "message_stop before message_start"));
                }
                self.done = true;
            }
            "error" => {
                let error = crate::anthropic::api_error(data.get("error").unwrap_or(&data));
                // An overloaded stream may succeed when sent again; other errors are final. The
                // HTTP model decides whether it may resend (not once the user saw a part).
                let overloaded =
                    data.pointer("/error/type").and_then(Value::as_str) == Some("overloaded_error");
                return Err(if overloaded {
                    ProviderError::new(ProviderErrorKind::Transport, error.message())
                } else {
                    error
                });
            }
            // `ping` and future events.
            _ => {}
        }
        Ok(())
    }

    fn responses(
        &mut self,
        event: &SseEvent,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<(), ProviderError> {
        let data = self.json(event)?;
        let kind = event_kind(&data, event);
        match kind.as_str() {
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(text) = data.get("delta").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    on_event(StreamEvent::Text(text.to_owned()));
                }
            }
            "response.reasoning_summary_text.delta" => {
                if let Some(text) = data.get("delta").and_then(Value::as_str)
                    && !text.is_empty()
                {
                    on_event(StreamEvent::Reasoning(text.to_owned()));
                }
            }
            "response.output_item.added" => {
                if let Some(item) = data.get("item")
                    && item.get("type").and_then(Value::as_str) == Some("function_call")
                {
                    let field = |k: &str| {
                        item.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    on_event(StreamEvent::ToolCall {
                        id: field("call_id"),
                        name: field("name"),
                    });
                }
            }
            "response.output_item.done" => {
                let index = data
                    .get("output_index")
                    .and_then(Value::as_u64)
                    .unwrap_or(self.items.len() as u64);
                if self.items.len() >= MAX_STREAM_ITEMS {
                    return Err(bad(
                        self.protocol,
                        format_args!("more than {MAX_STREAM_ITEMS} output items"),
                    ));
                }
                if let Some(item) = data.get("item") {
                    self.items.insert(index, item.clone());
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let response = data
                    .get("response")
                    .filter(|r| r.is_object())
                    .ok_or_else(|| bad(self.protocol, format_args!("{kind} has no `response`")))?;
                self.response = Some(response.clone());
                self.done = true;
            }
            "error" => {
                return Err(crate::anthropic::api_error(
                    data.get("error").unwrap_or(&data),
                ));
            }
            // Argument deltas, reasoning summaries and the like: the final items carry them.
            _ => {}
        }
        Ok(())
    }
}

/// An event's kind: the `type` in its data, else the SSE `event:` field (Anthropic and the
/// Responses API send both; either names the event).
fn event_kind(data: &Value, event: &SseEvent) -> String {
    data.get("type")
        .and_then(Value::as_str)
        .or(event.event.as_deref())
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut reader = SseReader::new();
        chunks
            .iter()
            .flat_map(|c| reader.push(c).expect("within the limits"))
            .collect()
    }

    #[test]
    fn reader_joins_split_frames_and_skips_comments() {
        let whole: &[u8] = b": keep-alive\r\nevent: a\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\n:ping\n\ndata: \xc3\xa9\n\n";
        let expected = vec![
            SseEvent {
                event: Some("a".into()),
                data: "{\"x\":\n1}".into(),
            },
            SseEvent {
                event: None,
                data: "é".into(),
            },
        ];
        assert_eq!(events(&[whole]), expected);
        // Every split point, including inside `\r\n` and inside the two-byte `é`.
        for cut in 0..whole.len() {
            assert_eq!(
                events(&[&whole[..cut], &whole[cut..]]),
                expected,
                "cut at {cut}"
            );
        }
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(events(&bytes), expected);
    }

    #[test]
    fn reader_refuses_an_endless_line() {
        let mut reader = SseReader::new();
        let error = reader
            .push(&vec![b'a'; MAX_LINE_BYTES + 1])
            .expect_err("too long");
        assert_eq!(
            error.message(),
            format!("an event stream line is longer than {MAX_LINE_BYTES} bytes")
        );
    }
}
