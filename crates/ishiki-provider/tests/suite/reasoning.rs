//! Reasoning on the wire, checked by the enforcing fakes (`fake.rs`): an assistant turn is
//! replayed in the order it was received; reasoning is replayed byte for byte to the provider
//! and model that made it and dropped (never edited) for any other; on models that bind
//! thinking to its prefix, a change keeps the thinking before it and drops the thinking after
//! it, once and for good, while thinking made after the change is kept — and a property test
//! over random live sessions (reasoning, tool loops, other models, prunings) in which the fake
//! never refuses a request.

use ishiki_core::{MediaPart, Message, ModelResponse, Part, Reasoning, Request, Role, ToolSpec};
use ishiki_provider::{
    ANTHROPIC, AnthropicOptions, OPENAI_RESPONSES, OpenAiOptions, Protocol, ResponsesOptions,
    parse_anthropic_response, parse_responses_response, render_anthropic,
    render_anthropic_with_report, render_openai, render_responses, render_responses_with_report,
    stamp_reasoning,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::fake::{ResponsesRule, check_anthropic, sign_answer};
use super::render::{check_anthropic as check_anthropic_shape, check_openai, check_responses};

fn message(id: &str, role: Role, content: Vec<Part>) -> Message {
    Message {
        id: id.to_owned(),
        role,
        created_at: "2026-01-01T00:00:00Z".into(),
        content,
    }
}

fn text(text: &str) -> Part {
    Part::Text { text: text.into() }
}

fn result(id: &str) -> Part {
    Part::ToolResult {
        call_id: id.into(),
        is_error: false,
        text: "milk".into(),
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "read".into(),
        description: "Read".into(),
        input_schema: json!({ "type": "object" }),
    }]
}

fn image(n: usize) -> Part {
    Part::Image(MediaPart {
        media_type: "image/png".into(),
        url: format!("asset://{n}.png"),
        bytes: 3,
        sha256: "00".into(),
        data: Some("iVBORw==".into()),
    })
}

/// The reasoning blocks of a rendered body, in body order, as JSON text.
fn rendered_reasoning(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut visit = |v: &Value| {
        if matches!(
            v["type"].as_str(),
            Some("thinking" | "redacted_thinking" | "reasoning")
        ) {
            out.push(v.to_string());
        }
    };
    for item in body["input"].as_array().into_iter().flatten() {
        visit(item);
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        for block in m["content"].as_array().into_iter().flatten() {
            visit(block);
        }
    }
    out
}

/// A live session against the enforcing fake of one API: each turn renders the history, the
/// fake checks the body (a refusal fails the test) and answers with reasoning it signed, the
/// answer is parsed and stamped as `HttpModel` does, and committed in order.
struct Live {
    protocol: Protocol,
    model: String,
    history: Vec<Message>,
    rule: ResponsesRule,
    turns: usize,
    /// Reasoning kept and dropped over the session.
    kept: usize,
    dropped: usize,
}

impl Live {
    fn new(protocol: Protocol, model: &str) -> Self {
        Self {
            protocol,
            model: model.to_owned(),
            history: vec![
                message("sys", Role::System, vec![text("rules")]),
                message("m0", Role::User, vec![text("start")]),
            ],
            rule: ResponsesRule::default(),
            turns: 0,
            kept: 0,
            dropped: 0,
        }
    }

    fn request(&self) -> Request {
        Request {
            tools: tools(),
            messages: self
                .history
                .iter()
                .cloned()
                .map(std::sync::Arc::new)
                .collect(),
        }
    }

    fn render(&self) -> Value {
        let request = self.request();
        match self.protocol {
            Protocol::Anthropic => {
                render_anthropic(&request, &AnthropicOptions::new(&self.model, 1024))
            }
            _ => render_responses(&request, &ResponsesOptions::new(&self.model)),
        }
    }

    /// One model turn: `thinking` reasoning blocks interleaved with `calls` calls (a block
    /// before each call and one after), then a text when there is no call.
    fn turn(&mut self, thinking: usize, calls: usize) -> Result<Value, String> {
        if self
            .history
            .last()
            .is_some_and(|m| m.role == Role::Assistant)
        {
            let n = self.history.len();
            self.history
                .push(message(&format!("u{n}"), Role::User, vec![text("go on")]));
        }
        let request = self.request();
        let n = self.turns;
        self.turns += 1;
        let body = match self.protocol {
            Protocol::Anthropic => {
                let (body, report) = render_anthropic_with_report(
                    &request,
                    &AnthropicOptions::new(&self.model, 1024),
                );
                self.kept += report.kept;
                self.dropped += report.dropped_changed;
                check_anthropic(&body, "")?;
                body
            }
            _ => {
                let (body, report) =
                    render_responses_with_report(&request, &ResponsesOptions::new(&self.model));
                self.kept += report.kept;
                self.dropped += report.dropped_changed;
                self.rule.check(&body)?;
                body
            }
        };
        let mut blocks = Vec::new();
        for k in 0..thinking.max(calls) {
            if k < thinking {
                blocks.push(match self.protocol {
                    Protocol::Anthropic => {
                        json!({ "type": "thinking", "thinking": if k % 2 == 0 { String::new() } else { format!("t{n}.{k}") }, "signature": "" })
                    }
                    _ => json!({ "type": "reasoning", "id": format!("rs_{n}_{k}"), "summary": [],
                        "encrypted_content": format!("enc{n}.{k}") }),
                });
            }
            if k < calls {
                blocks.push(match self.protocol {
                    Protocol::Anthropic => json!({ "type": "tool_use", "id": format!("c{n}-{k}"),
                        "name": "read", "input": { "url": "workspace:///notes.txt" } }),
                    _ => json!({ "type": "function_call", "id": format!("fc_{n}_{k}"),
                        "call_id": format!("c{n}-{k}"), "name": "read",
                        "arguments": "{\"url\":\"workspace:///notes.txt\"}" }),
                });
            }
        }
        // An answer never ends with reasoning: a text follows it.
        let ends_in_reasoning = blocks
            .last()
            .is_some_and(|b| matches!(b["type"].as_str(), Some("thinking" | "reasoning")));
        if calls == 0 || ends_in_reasoning {
            blocks.push(match self.protocol {
                Protocol::Anthropic => json!({ "type": "text", "text": format!("answer {n}") }),
                _ => json!({ "type": "message", "role": "assistant", "id": format!("msg_{n}"),
                    "content": [{ "type": "output_text", "text": format!("answer {n}") }] }),
            });
        }
        let mut response: ModelResponse = match self.protocol {
            Protocol::Anthropic => {
                sign_answer(&body, &mut blocks);
                parse_anthropic_response(&json!({ "type": "message", "role": "assistant",
                    "model": self.model, "content": blocks }))
            }
            _ => {
                self.rule.remember(&blocks);
                parse_responses_response(&json!({ "object": "response", "status": "completed",
                    "model": self.model, "output": blocks }))
            }
        }
        .map_err(|e| e.to_string())?
        .response;
        stamp_reasoning(self.protocol, &body, &mut response);
        let at = self.history.len();
        self.history.push(message(
            &format!("s{n}-assistant"),
            Role::Assistant,
            response.parts,
        ));
        if calls > 0 {
            self.history.push(message(
                &format!("s{n}-tools"),
                Role::Tool,
                (0..calls).map(|k| result(&format!("c{n}-{k}"))).collect(),
            ));
        }
        Ok(json!(at))
    }

    fn user(&mut self, with_image: bool) {
        let n = self.history.len();
        let mut content = vec![text("more")];
        if with_image {
            content.push(image(n));
        }
        self.history
            .push(message(&format!("att-msg-u{n}"), Role::User, content));
    }

    /// An edit of earlier context: the oldest image still present leaves (pruning). Returns
    /// the index of the changed message.
    fn prune(&mut self) -> Option<usize> {
        let at = self
            .history
            .iter()
            .position(|m| m.content.iter().any(|p| matches!(p, Part::Image(_))))?;
        self.history[at]
            .content
            .retain(|p| !matches!(p, Part::Image(_)));
        self.history[at].content.push(text("[image pruned]"));
        Some(at)
    }
}

#[test]
fn an_assistant_turn_is_replayed_in_the_order_it_was_received() {
    // thinking, tool_use, thinking, text, text, tool_use: as the API sent it.
    let mut live = Live::new(Protocol::Anthropic, "claude-fable-5-2");
    let body = live.render();
    let mut content = vec![
        json!({ "type": "thinking", "thinking": "", "signature": "" }),
        json!({ "type": "tool_use", "id": "c1", "name": "read", "input": {} }),
        json!({ "type": "thinking", "thinking": "then", "signature": "" }),
        json!({ "type": "text", "text": "First block." }),
        json!({ "type": "text", "text": "Second block." }),
        json!({ "type": "tool_use", "id": "c2", "name": "read", "input": {} }),
    ];
    sign_answer(&body, &mut content);
    let mut response = parse_anthropic_response(&json!({ "type": "message",
        "model": "claude-fable-5-2", "content": content.clone() }))
    .unwrap()
    .response;
    stamp_reasoning(Protocol::Anthropic, &body, &mut response);
    live.history
        .push(message("s0-assistant", Role::Assistant, response.parts));
    live.history.push(message(
        "s0-tools",
        Role::Tool,
        vec![result("c1"), result("c2")],
    ));
    let replay = live.render();
    assert_eq!(replay["messages"][1]["content"], json!(content));
    check_anthropic(&replay, "").expect("the fake accepts the replay");

    // Responses: rs_1, call_X, rs_2, call_Y stays in that order.
    let mut live = Live::new(Protocol::OpenAiResponses, "gpt-test");
    live.turn(2, 2).unwrap();
    live.turn(0, 0).unwrap();
    let kinds: Vec<String> = live.render()["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            i["call_id"]
                .as_str()
                .or(i["id"].as_str())
                .unwrap_or("-")
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds[2..8],
        ["rs_0_0", "c0-0", "rs_0_1", "c0-1", "c0-0", "c0-1"]
    );
}

#[test]
fn reasoning_is_replayed_verbatim_to_its_own_provider_and_model_only() {
    let mut live = Live::new(Protocol::Anthropic, "m");
    live.turn(1, 1).unwrap();
    live.turn(1, 1).unwrap();
    let request = live.request();
    let anthropic = render_anthropic(&request, &AnthropicOptions::new("m", 1024));
    assert_eq!(check_anthropic_shape(&anthropic), Ok(()), "{anthropic:#}");
    assert_eq!(rendered_reasoning(&anthropic).len(), 2);

    // Another model of the same provider: dropped, the body still valid and accepted.
    let (other, report) =
        render_anthropic_with_report(&request, &AnthropicOptions::new("m2", 1024));
    assert_eq!(rendered_reasoning(&other), Vec::<String>::new());
    assert_eq!(check_anthropic_shape(&other), Ok(()));
    check_anthropic(&other, "").expect("no thinking, nothing to refuse");
    assert_eq!((report.kept, report.dropped_foreign), (0, 2));

    // Chat Completions cannot take reasoning back; Responses takes only its own.
    let openai = render_openai(&request, &OpenAiOptions::new("m"));
    assert_eq!(check_openai(&openai), Ok(()));
    assert!(!openai.to_string().contains("sig-"), "{openai}");
    let responses = render_responses(&request, &ResponsesOptions::new("m"));
    assert_eq!(check_responses(&responses), Ok(()));
    assert_eq!(rendered_reasoning(&responses), Vec::<String>::new());
}

#[test]
fn a_change_keeps_the_thinking_before_it_and_drops_the_thinking_after_it_for_good() {
    let mut live = Live::new(Protocol::Anthropic, "claude-fable-5-2");
    live.turn(1, 1).unwrap(); // thinking A, before the image
    live.user(true);
    live.turn(1, 1).unwrap(); // thinking B, after the image
    live.turn(1, 0).unwrap(); // thinking C
    let before = rendered_reasoning(&live.render());
    assert_eq!(before.len(), 3);
    // The image leaves: A (before it) stays, B and C (after it) go — the old rule kept the
    // reasoning after the change and dropped the reasoning before it, a 400 on these models.
    live.prune().unwrap();
    let (body, report) = render_anthropic_with_report(
        &live.request(),
        &AnthropicOptions::new("claude-fable-5-2", 1024),
    );
    assert_eq!(rendered_reasoning(&body), before[..1]);
    assert_eq!((report.kept, report.dropped_changed), (1, 2));
    check_anthropic(&body, "").expect("the fake accepts the request");
    // Thinking made after the change is bound to the new prefix and stays; B and C stay out.
    live.turn(1, 1).unwrap();
    live.turn(0, 0).unwrap();
    let after = rendered_reasoning(&live.render());
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[0], before[0]);
    assert!(!after.contains(&before[1]) && !after.contains(&before[2]));
}

#[test]
fn reasoning_without_a_stamp_is_never_replayed_on_a_binding_model() {
    let mut live = Live::new(Protocol::Anthropic, "claude-fable-5-2");
    live.turn(1, 0).unwrap();
    for m in &mut live.history {
        for p in &mut m.content {
            if let Part::Reasoning(r) = p {
                r.prefix = None;
            }
        }
    }
    assert_eq!(rendered_reasoning(&live.render()), Vec::<String>::new());
    // An older model checks only a block's own signature: its thinking is replayed whole.
    let options = AnthropicOptions {
        preserved_thinking: false,
        ..AnthropicOptions::new("claude-fable-5-2", 1024)
    };
    assert_eq!(
        rendered_reasoning(&render_anthropic(&live.request(), &options)).len(),
        1
    );
}

#[test]
fn a_response_to_a_rendered_body_is_stamped_with_that_body_and_nothing_else() {
    let body = render_anthropic(
        &Request {
            tools: tools(),
            messages: vec![message("m0", Role::User, vec![text("hi")]).into()],
        },
        &AnthropicOptions::new("m", 10),
    );
    let thinking = |data: Value| {
        Part::Reasoning(Reasoning {
            provider: ANTHROPIC.into(),
            model: "m".into(),
            data,
            prefix: None,
        })
    };
    let mut response = ModelResponse {
        parts: vec![thinking(json!({ "type": "thinking" })), text("x")],
        ..ModelResponse::default()
    };
    stamp_reasoning(Protocol::OpenAi, &body, &mut response);
    assert!(response.reasoning().all(|r| r.prefix.is_none()));
    stamp_reasoning(Protocol::Anthropic, &body, &mut response);
    let stamp = response.reasoning().next().unwrap().prefix.clone().unwrap();
    assert_eq!(stamp.len(), 64);
    let mut other = body.clone();
    other["system"] = json!([{ "type": "text", "text": "changed" }]);
    let mut again = response.clone();
    stamp_reasoning(Protocol::Anthropic, &other, &mut again);
    assert_ne!(
        again.reasoning().next().unwrap().prefix.as_ref(),
        Some(&stamp)
    );
    assert_eq!(OPENAI_RESPONSES, "openai-responses");
}

// ---- property test ----

#[derive(Debug, Clone)]
enum Event {
    User {
        image: bool,
    },
    Turn {
        thinking: usize,
        calls: usize,
    },
    Prune,
    /// One turn answered by another model of the same provider.
    OtherModel,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        2 => any::<bool>().prop_map(|image| Event::User { image }),
        4 => (0usize..3, 0usize..3).prop_map(|(thinking, calls)| Event::Turn { thinking, calls }),
        1 => Just(Event::Prune),
        1 => Just(Event::OtherModel),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Over random live sessions the enforcing fakes never refuse a request; every replayed
    /// block is one the fake made, unchanged; without an edit nothing of the model's own is
    /// dropped; and thinking made after the last edit is always replayed.
    #[test]
    fn no_live_session_is_ever_refused_and_unedited_thinking_is_kept(
        events in prop::collection::vec(event(), 1..24),
        responses in any::<bool>(),
    ) {
        let (protocol, model) = if responses {
            (Protocol::OpenAiResponses, "gpt-test")
        } else {
            (Protocol::Anthropic, "claude-fable-5-2")
        };
        let mut live = Live::new(protocol, model);
        let mut edited_at: Option<usize> = None;
        let mut last_edit_turn = 0usize;
        for e in &events {
            match e {
                Event::User { image } => live.user(*image),
                Event::Turn { thinking, calls } => {
                    live.turn(*thinking, *calls).map_err(TestCaseError::fail)?;
                }
                Event::Prune => {
                    if let Some(at) = live.prune() {
                        edited_at = Some(edited_at.map_or(at, |e| e.min(at)));
                        last_edit_turn = live.turns;
                    }
                }
                Event::OtherModel => {
                    live.model = format!("{model}-other");
                    live.turn(1, 1).map_err(TestCaseError::fail)?;
                    live.model = model.to_owned();
                }
            }
        }
        // The final request, checked too.
        live.turn(0, 0).map_err(TestCaseError::fail)?;
        let body = live.render();
        let replayed = rendered_reasoning(&body);
        let own: Vec<(usize, String)> = live
            .history
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.content.iter().map(move |p| (i, p)))
            .filter_map(|(i, p)| match p {
                Part::Reasoning(r) if r.model == model => Some((i, r.data.to_string())),
                _ => None,
            })
            .collect();
        // Replayed blocks are own blocks, verbatim, in history order.
        let mut cursor = 0;
        for block in &replayed {
            let found = own[cursor..].iter().position(|(_, data)| data == block);
            prop_assert!(found.is_some(), "a replayed block not in history order: {block}");
            cursor += found.unwrap_or(0) + 1;
        }
        if responses || edited_at.is_none() {
            // Nothing binds Responses reasoning; without an edit, nothing of ours is dropped
            // (another model's blocks were never sent, consistently).
            prop_assert_eq!(live.dropped, 0);
        }
        // Thinking made after the last edit is replayed.
        prop_assert!(
            own.iter()
                .filter(|(i, _)| turn_of(&live.history[*i].id) >= last_edit_turn)
                .all(|(_, data)| replayed.contains(data)),
            "thinking made after the last edit was dropped"
        );
    }
}

/// The turn number of an assistant message id `s{n}-assistant`.
fn turn_of(id: &str) -> usize {
    id.strip_prefix('s')
        .and_then(|rest| rest.split('-').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn delta(name: &str) -> Part {
    Part::CatalogDelta {
        added: vec![ishiki_core::DeltaEntry {
            name: name.into(),
            description: "Weather".into(),
            input_schema: json!({ "type": "object" }),
            signature: None,
        }],
    }
}

#[test]
fn a_later_system_message_is_native_where_the_api_takes_it_and_its_tools_join_by_addition() {
    let mut request = Live::new(Protocol::Anthropic, "m").request();
    let mut messages: Vec<Message> = request.messages.iter().map(|m| (**m).clone()).collect();
    messages.push(message(
        "s1-catalog",
        Role::System,
        vec![text("New tools are available: weather"), delta("weather")],
    ));
    request.messages = messages.iter().cloned().map(std::sync::Arc::new).collect();
    request.tools.push(ToolSpec {
        name: "weather".into(),
        description: "Weather".into(),
        input_schema: json!({ "type": "object" }),
    });
    let native = AnthropicOptions {
        system_messages: true,
        ..AnthropicOptions::new("claude-opus-5-5", 1024)
    };
    let body = render_anthropic(&request, &native);
    let last = &body["messages"][1];
    assert_eq!(last["role"], "system", "{body:#}");
    assert_eq!(
        last["content"][0],
        json!({ "type": "tool_addition", "tool": { "type": "tool_definition",
            "definition": { "name": "weather", "description": "Weather", "input_schema": { "type": "object" } } } })
    );
    // `tools` is built once: the discovered tool is not appended to it.
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read"]);
    assert_eq!(
        ishiki_provider::anthropic::anthropic_betas(&body),
        [ishiki_provider::anthropic::INLINE_TOOLS_BETA]
    );
    check_anthropic(&body, ishiki_provider::anthropic::INLINE_TOOLS_BETA)
        .expect("the fake accepts it");
    // A model without system messages: the delta is user text, and the tool joins `tools`.
    let text_only = render_anthropic(&request, &AnthropicOptions::new("claude-sonnet-5", 1024));
    assert_eq!(text_only["messages"].as_array().unwrap().len(), 1);
    assert_eq!(text_only["tools"].as_array().unwrap().len(), 2);
    // A system message where the API refuses one (right before a user message) stays user text.
    messages.push(message("m9", Role::User, vec![text("and then?")]));
    request.messages = messages.iter().cloned().map(std::sync::Arc::new).collect();
    let body = render_anthropic(&request, &native);
    assert!(
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["role"] != "system"),
        "{body:#}"
    );
    check_anthropic(&body, "").expect("the fake accepts it");
}

#[test]
fn thinking_is_asked_for_the_way_each_family_takes_it() {
    let request = Live::new(Protocol::Anthropic, "m").request();
    let body = |thinking, drop_invalid_thinking| {
        render_anthropic(
            &request,
            &AnthropicOptions {
                thinking,
                drop_invalid_thinking,
                ..AnthropicOptions::new("claude-fable-5-2", 4096)
            },
        )
    };
    let adaptive = body(
        Some(ishiki_provider::Thinking::Adaptive {
            effort: Some("high".into()),
            summarized: true,
        }),
        true,
    );
    assert_eq!(
        adaptive["thinking"],
        json!({ "type": "adaptive", "display": "summarized",
            "block_binding": { "prefix_mismatch_behavior": "drop_block" } })
    );
    assert_eq!(adaptive["output_config"], json!({ "effort": "high" }));
    check_anthropic(&adaptive, ishiki_provider::anthropic::THINKING_BINDING_BETA)
        .expect("accepted");
    // Budget tokens: what older models take, and what the new families refuse.
    let budget = body(Some(ishiki_provider::Thinking::Budget(2048)), false);
    assert_eq!(
        budget["thinking"],
        json!({ "type": "enabled", "budget_tokens": 2048 })
    );
    assert!(check_anthropic(&budget, "").is_err());
    // The safety net alone names adaptive thinking, the default of these models.
    assert_eq!(
        body(None, true)["thinking"]["type"],
        "adaptive",
        "drop_block needs a thinking object"
    );
    assert_eq!(body(None, false).get("thinking"), None);
}

#[test]
fn every_example_request_is_accepted_by_the_enforcing_fake() {
    for case in super::common::cases() {
        for system_messages in [false, true] {
            let body = render_anthropic(
                &case.request,
                &AnthropicOptions {
                    system_messages,
                    ..AnthropicOptions::new("claude-opus-5-5", 1024)
                },
            );
            let betas = ishiki_provider::anthropic::anthropic_betas(&body).join(",");
            if let Err(e) = check_anthropic(&body, &betas) {
                panic!("{} step {}: {e}", case.scenario, case.step);
            }
        }
    }
}
