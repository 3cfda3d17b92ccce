//! Every projected request of every example scenario renders to both wire shapes, and the
//! shapes keep the rules the APIs enforce (hand-written checks beside the schema test).

use std::collections::BTreeSet;

use ishiki_core::{MediaPart, Message, Part, Request, Role, ToolSpec};
use ishiki_provider::{
    AnthropicOptions, OpenAiOptions, ResponsesOptions, render_anthropic, render_openai,
    render_responses,
};
use serde_json::{Value, json};

use super::common::cases;

fn is_base64(s: &str) -> bool {
    !s.is_empty()
        && s.len().is_multiple_of(4)
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
}

/// The rules of the Chat Completions API a renderer can break.
pub(crate) fn check_openai(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    let mut open: Vec<String> = Vec::new();
    for (k, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().ok_or(format!("message {k}: no role"))?;
        if role != "tool" && !open.is_empty() {
            return Err(format!("message {k}: calls {open:?} have no tool message"));
        }
        match role {
            "system" | "developer" => {
                m["content"]
                    .as_str()
                    .ok_or(format!("message {k}: system content not text"))?;
            }
            "user" => {
                for part in m["content"]
                    .as_array()
                    .ok_or(format!("message {k}: no parts"))?
                {
                    match part["type"].as_str() {
                        Some("text") => {
                            part["text"]
                                .as_str()
                                .ok_or(format!("message {k}: text part"))?;
                        }
                        Some("image_url") => {
                            let url = part["image_url"]["url"].as_str().unwrap_or_default();
                            let (head, data) = url.split_once(";base64,").unwrap_or_default();
                            if !head.starts_with("data:image/") || !is_base64(data) {
                                return Err(format!("message {k}: bad data url"));
                            }
                        }
                        other => return Err(format!("message {k}: part type {other:?}")),
                    }
                }
            }
            "assistant" => {
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    let args = call["function"]["arguments"].as_str().ok_or("arguments")?;
                    serde_json::from_str::<Value>(args).map_err(|e| format!("arguments: {e}"))?;
                    if call["type"] != "function" {
                        return Err(format!("message {k}: call type"));
                    }
                    open.push(call["id"].as_str().ok_or("call id")?.to_owned());
                }
                if m["content"].is_null() && open.is_empty() {
                    return Err(format!("message {k}: assistant says nothing"));
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().ok_or("tool_call_id")?;
                let at = open.iter().position(|c| c == id).ok_or(format!(
                    "message {k}: tool message for {id} does not follow its call"
                ))?;
                open.remove(at);
                m["content"].as_str().ok_or("tool content")?;
            }
            other => return Err(format!("message {k}: role {other}")),
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if tool["type"] != "function" || !tool["function"]["parameters"].is_object() {
            return Err(format!("bad tool {tool}"));
        }
    }
    Ok(())
}

/// The rules of the Messages API a renderer can break.
pub(crate) fn check_anthropic(body: &Value) -> Result<(), String> {
    if !body["max_tokens"].is_u64() || !body["model"].is_string() {
        return Err("model and max_tokens are required".into());
    }
    let mut markers = 0;
    for block in body["system"].as_array().into_iter().flatten() {
        if block["type"] != "text" || block["text"].as_str().is_none_or(str::is_empty) {
            return Err(format!("system block {block}"));
        }
        markers += usize::from(block.get("cache_control").is_some());
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if !tool["input_schema"].is_object() || !tool["name"].is_string() {
            return Err(format!("tool {tool}"));
        }
        markers += usize::from(tool.get("cache_control").is_some());
    }
    let messages = body["messages"].as_array().ok_or("no messages")?;
    if messages.first().is_none_or(|m| m["role"] != "user") {
        return Err("the first message must be a user message".into());
    }
    let mut previous_role = "";
    let mut open: BTreeSet<String> = BTreeSet::new();
    for (k, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().ok_or("role")?;
        if role == previous_role {
            return Err(format!("message {k}: two {role} messages in a row"));
        }
        previous_role = role;
        let blocks = m["content"].as_array().ok_or("content")?;
        if blocks.is_empty() {
            return Err(format!("message {k}: empty content"));
        }
        let mut answered = BTreeSet::new();
        let mut seen_other = false;
        for block in blocks {
            markers += usize::from(block.get("cache_control").is_some());
            match (role, block["type"].as_str().unwrap_or_default()) {
                (_, "text") => {
                    seen_other = true;
                    if block["text"].as_str().is_none_or(str::is_empty) {
                        return Err(format!("message {k}: empty text block"));
                    }
                }
                ("user", "image") => {
                    seen_other = true;
                    let source = &block["source"];
                    let media = source["media_type"].as_str().unwrap_or_default();
                    if source["type"] != "base64"
                        || !["image/png", "image/jpeg", "image/gif", "image/webp"].contains(&media)
                        || !is_base64(source["data"].as_str().unwrap_or_default())
                    {
                        return Err(format!("message {k}: image source"));
                    }
                }
                ("user", "tool_result") => {
                    if seen_other {
                        return Err(format!("message {k}: tool_result after other blocks"));
                    }
                    let id = block["tool_use_id"].as_str().ok_or("tool_use_id")?;
                    if !open.contains(id) {
                        return Err(format!("message {k}: tool_result {id} without tool_use"));
                    }
                    answered.insert(id.to_owned());
                }
                ("assistant", "tool_use") => {
                    seen_other = true;
                    if !block["input"].is_object() {
                        return Err(format!("message {k}: tool_use input not an object"));
                    }
                }
                ("assistant", "thinking" | "redacted_thinking") => {
                    // Thinking comes first in its message and is never a cache breakpoint.
                    if seen_other || block.get("cache_control").is_some() {
                        return Err(format!("message {k}: misplaced or marked thinking block"));
                    }
                }
                (role, kind) => {
                    return Err(format!("message {k}: {kind} block in a {role} message"));
                }
            }
        }
        if role == "user" {
            if answered != open {
                return Err(format!(
                    "message {k}: calls {open:?} answered by {answered:?}"
                ));
            }
            open.clear();
        } else {
            open = blocks
                .iter()
                .filter_map(|b| b["id"].as_str().map(str::to_owned))
                .collect();
        }
    }
    if markers > 4 {
        return Err(format!("{markers} cache_control markers (at most 4)"));
    }
    Ok(())
}

/// The rules of the Responses API a renderer can break.
pub(crate) fn check_responses(body: &Value) -> Result<(), String> {
    if body["store"] != false || body["include"] != json!(["reasoning.encrypted_content"]) {
        return Err("store: false with encrypted reasoning is required".into());
    }
    let mut called = BTreeSet::new();
    for (k, item) in body["input"]
        .as_array()
        .ok_or("no input")?
        .iter()
        .enumerate()
    {
        match item["type"].as_str().unwrap_or_default() {
            "message" => match item["role"].as_str().unwrap_or_default() {
                "system" | "developer" | "assistant" => {
                    item["content"]
                        .as_str()
                        .ok_or(format!("item {k}: content"))?;
                }
                "user" => {
                    for part in item["content"].as_array().ok_or("user parts")? {
                        match part["type"].as_str() {
                            Some("input_text") => {
                                part["text"].as_str().ok_or(format!("item {k}: text"))?;
                            }
                            Some("input_image") => {
                                let url = part["image_url"].as_str().unwrap_or_default();
                                let (head, data) = url.split_once(";base64,").unwrap_or_default();
                                if !head.starts_with("data:image/") || !is_base64(data) {
                                    return Err(format!("item {k}: bad data url"));
                                }
                            }
                            other => return Err(format!("item {k}: part type {other:?}")),
                        }
                    }
                }
                other => return Err(format!("item {k}: role {other}")),
            },
            "function_call" => {
                let args = item["arguments"].as_str().ok_or("arguments")?;
                serde_json::from_str::<Value>(args).map_err(|e| format!("arguments: {e}"))?;
                called.insert(item["call_id"].as_str().ok_or("call_id")?.to_owned());
            }
            "function_call_output" => {
                let id = item["call_id"].as_str().ok_or("call_id")?;
                if !called.contains(id) {
                    return Err(format!("item {k}: output for {id} before its call"));
                }
                item["output"].as_str().ok_or("output")?;
            }
            "reasoning" => {
                item["id"]
                    .as_str()
                    .ok_or(format!("item {k}: reasoning id"))?;
            }
            other => return Err(format!("item {k}: type {other}")),
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if tool["type"] != "function" || !tool["parameters"].is_object() {
            return Err(format!("bad tool {tool}"));
        }
    }
    Ok(())
}

#[test]
fn every_example_request_renders_to_valid_responses_shapes() {
    for case in &cases() {
        let body = render_responses(&case.request, &ResponsesOptions::new("test-model"));
        if let Err(e) = check_responses(&body) {
            panic!("{} step {}: {e}\n{body:#}", case.scenario, case.step);
        }
    }
}

#[test]
fn every_example_request_renders_to_valid_openai_shapes() {
    let cases = cases();
    assert!(cases.len() >= 60, "{} requests", cases.len());
    for case in &cases {
        let body = render_openai(&case.request, &OpenAiOptions::new("test-model"));
        if let Err(e) = check_openai(&body) {
            panic!("{} step {}: {e}\n{body:#}", case.scenario, case.step);
        }
    }
}

#[test]
fn every_example_request_renders_to_valid_anthropic_shapes() {
    for case in &cases() {
        let body = render_anthropic(&case.request, &AnthropicOptions::new("test-model", 1024));
        if let Err(e) = check_anthropic(&body) {
            panic!("{} step {}: {e}\n{body:#}", case.scenario, case.step);
        }
    }
}

#[test]
fn every_example_image_is_rendered_with_its_bytes() {
    // Each embedded image appears once per shape: nothing dropped or duplicated.
    for case in &cases() {
        let images = case
            .request
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter(|p| matches!(p, Part::Image(_)))
            .count();
        let openai = render_openai(&case.request, &OpenAiOptions::new("m")).to_string();
        let anthropic = render_anthropic(&case.request, &AnthropicOptions::new("m", 8)).to_string();
        assert_eq!(openai.matches("\"image_url\":{").count(), images);
        assert_eq!(anthropic.matches("\"type\":\"base64\"").count(), images);
    }
}

fn msg(id: &str, role: Role, content: Vec<Part>) -> Message {
    Message {
        id: id.into(),
        role,
        created_at: "2026-01-01T00:00:00Z".into(),
        content,
    }
}

fn text(t: &str) -> Part {
    Part::Text { text: t.into() }
}

fn call(id: &str) -> Part {
    Part::ToolCall {
        id: id.into(),
        name: "read".into(),
        input: json!({ "url": "workspace:///a.png" }),
    }
}

fn result(id: &str, is_error: bool) -> Part {
    Part::ToolResult {
        call_id: id.into(),
        is_error,
        text: format!("result {id}"),
    }
}

fn image(data: Option<&str>) -> Part {
    Part::Image(MediaPart {
        media_type: "image/png".into(),
        url: "artifact://read/a.png".into(),
        bytes: 3,
        sha256: "00".into(),
        data: data.map(str::to_owned),
    })
}

fn sample() -> Request {
    Request {
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read".into(),
            input_schema: json!({ "type": "object" }),
        }],
        messages: vec![
            msg("sys", Role::System, vec![text("rules")]),
            msg("m1", Role::User, vec![text("look")]),
            msg(
                "s1-assistant",
                Role::Assistant,
                vec![text("ok"), call("c1"), call("c2")],
            ),
            msg(
                "s1-tools",
                Role::Tool,
                vec![result("c1", false), result("c2", true)],
            ),
            msg(
                "att-call-c1",
                Role::User,
                vec![text("[attachment]"), image(Some("AAAA"))],
            ),
            msg("s2-catalog", Role::System, vec![text("new tools")]),
            msg("s2-assistant", Role::Assistant, vec![call("c3")]),
            msg(
                "s2-tools",
                Role::Tool,
                vec![result("c3", false), result("orphan", false)],
            ),
            msg("att-call-c3", Role::User, vec![image(None)]),
        ]
        .into_iter()
        .map(std::sync::Arc::new)
        .collect(),
    }
}

#[test]
fn openai_keeps_roles_and_splits_tool_results() {
    let body = render_openai(&sample(), &OpenAiOptions::new("m"));
    check_openai(&body).unwrap();
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
            "system",
            "assistant",
            "tool",
            "user",
            "user"
        ]
    );
    let messages = &body["messages"];
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"url":"workspace:///a.png"}"#
    );
    assert_eq!(
        messages[5]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    // A result whose call is not in the request becomes user text.
    assert_eq!(
        messages[9]["content"][0]["text"],
        "[result of call orphan]\nresult orphan\n[end of result of call orphan]"
    );
    // Media without data is a marker, never an empty image.
    assert_eq!(
        messages[10]["content"][0]["text"],
        "[image artifact://read/a.png (image/png, 3 bytes): no data in this request]"
    );
    let developer = render_openai(
        &sample(),
        &OpenAiOptions {
            developer_role: true,
            max_tokens: Some(9),
            ..OpenAiOptions::new("m")
        },
    );
    assert_eq!(developer["messages"][0]["role"], "developer");
    // The limit goes as `max_completion_tokens` (OpenAI deprecated `max_tokens`, and its
    // reasoning models refuse it), never as both.
    assert_eq!(developer["max_completion_tokens"], 9);
    assert_eq!(developer.get("max_tokens"), None);
}

#[test]
fn anthropic_merges_user_side_messages_and_marks_the_stable_end() {
    let body = render_anthropic(&sample(), &AnthropicOptions::new("m", 100));
    check_anthropic(&body).unwrap();
    assert_eq!(body["system"], json!([{ "type": "text", "text": "rules" }]));
    let m = &body["messages"];
    assert_eq!(m.as_array().unwrap().len(), 5);
    // Results first, then the attachment, then the later system message as user text.
    let kinds: Vec<&str> = m[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["tool_result", "tool_result", "text", "image", "text"]
    );
    assert_eq!(m[2]["content"][1]["is_error"], true);
    assert_eq!(m[2]["content"][4]["text"], "new tools");
    // Breakpoints: the last tool; the newest result (the fresh attachment after it may be
    // `once`); and where the previous request put it (before that request's fresh attachment).
    assert_eq!(body["tools"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(m[4]["content"][1]["cache_control"]["type"], "ephemeral");
    assert!(m[4]["content"][2].get("cache_control").is_none());
    assert_eq!(m[2]["content"][1]["cache_control"]["type"], "ephemeral");
    let count = body.to_string().matches("cache_control").count();
    assert_eq!(count, 3);
    let plain = render_anthropic(
        &sample(),
        &AnthropicOptions {
            cache: false,
            ..AnthropicOptions::new("m", 1)
        },
    );
    assert!(!plain.to_string().contains("cache_control"));
}
