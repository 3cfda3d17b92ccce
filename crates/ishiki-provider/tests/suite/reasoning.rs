//! Reasoning parts on the wire: replayed byte for byte to the provider and model that made them,
//! dropped (never edited) for any other, dropped before the first message a pruning changed —
//! and a property test over random sessions with reasoning, tool loops and pruning: no signed
//! block is ever modified or reordered, and steps without pruning keep the previous request's
//! bytes as their prefix.

use ishiki_core::{MediaPart, Message, Part, Reasoning, Request, Role, ToolSpec};
use ishiki_provider::{
    ANTHROPIC, AnthropicOptions, OPENAI_RESPONSES, OpenAiOptions, ReplayPlan, ReplayState,
    ResponsesOptions, anthropic_cache_layout, reasoning_replay, render_anthropic, render_openai,
    render_responses,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::render::{check_anthropic, check_openai, check_responses};

fn message(id: &str, role: Role, content: Vec<Part>) -> Message {
    Message {
        id: id.to_owned(),
        role,
        created_at: "2026-01-01T00:00:00Z".into(),
        content,
    }
}

fn thinking(provider: &str, model: &str, tag: &str) -> Part {
    let data = if provider == ANTHROPIC {
        json!({ "type": "thinking", "thinking": format!("think {tag}"),
            "signature": format!("sig/{tag}+==") })
    } else {
        json!({ "type": "reasoning", "id": format!("rs_{tag}"), "summary": [],
            "encrypted_content": format!("enc/{tag}+==") })
    };
    Part::Reasoning(Reasoning {
        provider: provider.to_owned(),
        model: model.to_owned(),
        data,
    })
}

fn text(text: &str) -> Part {
    Part::Text { text: text.into() }
}

fn call(id: &str) -> Part {
    Part::ToolCall {
        id: id.into(),
        name: "read".into(),
        input: json!({ "url": "workspace:///notes.txt" }),
    }
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

/// A tool loop in which each assistant turn carries reasoning of both providers.
fn tool_loop() -> Request {
    Request {
        tools: tools(),
        messages: vec![
            message("sys", Role::System, vec![text("rules")]),
            message("m1", Role::User, vec![text("read my notes")]),
            message(
                "s1-assistant",
                Role::Assistant,
                vec![
                    thinking(ANTHROPIC, "m", "a1"),
                    thinking(OPENAI_RESPONSES, "m", "o1"),
                    thinking(ANTHROPIC, "other-model", "x1"),
                    text("Reading."),
                    call("c1"),
                ],
            ),
            message("s1-tools", Role::Tool, vec![result("c1")]),
            message(
                "s2-assistant",
                Role::Assistant,
                vec![
                    thinking(ANTHROPIC, "m", "a2"),
                    thinking(OPENAI_RESPONSES, "m", "o2"),
                    call("c2"),
                ],
            ),
            message("s2-tools", Role::Tool, vec![result("c2")]),
        ]
        .into_iter()
        .map(std::sync::Arc::new)
        .collect(),
    }
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

fn data(part: &Part) -> String {
    match part {
        Part::Reasoning(r) => r.data.to_string(),
        _ => unreachable!("a reasoning part"),
    }
}

#[test]
fn reasoning_is_replayed_verbatim_to_its_own_provider_and_model_only() {
    let request = tool_loop();
    let parts = |m: usize| request.messages[m].content.clone();

    let anthropic = render_anthropic(&request, &AnthropicOptions::new("m", 1024));
    assert_eq!(check_anthropic(&anthropic), Ok(()), "{anthropic:#}");
    assert_eq!(
        rendered_reasoning(&anthropic),
        vec![data(&parts(2)[0]), data(&parts(4)[0])]
    );
    // In place: first in its assistant message, before the text and the call.
    assert_eq!(
        anthropic["messages"][1]["content"][0]["signature"],
        "sig/a1+=="
    );
    assert_eq!(anthropic["messages"][1]["content"][1]["type"], "text");

    let responses = render_responses(&request, &ResponsesOptions::new("m"));
    assert_eq!(check_responses(&responses), Ok(()), "{responses:#}");
    assert_eq!(
        rendered_reasoning(&responses),
        vec![data(&parts(2)[1]), data(&parts(4)[1])]
    );
    let kinds: Vec<&str> = responses["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "message",
            "message",
            "reasoning",
            "message",
            "function_call",
            "function_call_output",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );

    // Chat Completions cannot take reasoning back: none of it is sent.
    let openai = render_openai(&request, &OpenAiOptions::new("m"));
    assert_eq!(check_openai(&openai), Ok(()));
    let wire = openai.to_string();
    assert!(!wire.contains("sig/") && !wire.contains("enc/"), "{wire}");

    // Another model of the same provider: dropped, the rest of the body unchanged.
    let other = render_anthropic(&request, &AnthropicOptions::new("m2", 1024));
    assert_eq!(rendered_reasoning(&other), Vec::<String>::new());
    assert_eq!(check_anthropic(&other), Ok(()));

    let report = reasoning_replay(&request, ANTHROPIC, "m", &ReplayPlan::default());
    assert_eq!(
        (
            report.kept,
            report.dropped_foreign,
            report.dropped_before_change
        ),
        (2, 3, 0)
    );
}

#[test]
fn a_pruning_step_drops_reasoning_before_the_first_changed_message_and_says_so() {
    let mut request = tool_loop();
    // The first request carried an image in the user message; pruning removed it.
    let mut before = request.clone();
    std::sync::Arc::make_mut(&mut before.messages[1])
        .content
        .push(Part::Image(MediaPart {
            media_type: "image/png".into(),
            url: "asset://a.png".into(),
            bytes: 3,
            sha256: "00".into(),
            data: Some("iVBORw==".into()),
        }));
    before.messages.truncate(4);
    let mut state = ReplayState::new();
    let first = state.plan(&before);
    assert_eq!(first, ReplayPlan::default());
    state.advance(&before, &first);

    let plan = state.plan(&request);
    assert_eq!(plan.changed_from, Some(1));
    // Message 1 changed: the reasoning of message 2 (after it) stays.
    let body = render_anthropic(
        &request,
        &AnthropicOptions {
            reasoning_from: plan.reasoning_from,
            ..AnthropicOptions::new("m", 1024)
        },
    );
    assert_eq!(rendered_reasoning(&body).len(), 2);
    state.advance(&request, &plan);

    // A change after the first turn: its reasoning is dropped, the second turn's kept.
    std::sync::Arc::make_mut(&mut request.messages[3]).content =
        vec![result("c1"), text("(pruned)")];
    let plan = state.plan(&request);
    assert_eq!(plan.changed_from, Some(3));
    for (provider, body) in [
        (
            ANTHROPIC,
            render_anthropic(
                &request,
                &AnthropicOptions {
                    reasoning_from: plan.reasoning_from,
                    ..AnthropicOptions::new("m", 1024)
                },
            ),
        ),
        (
            OPENAI_RESPONSES,
            render_responses(
                &request,
                &ResponsesOptions {
                    reasoning_from: plan.reasoning_from,
                    ..ResponsesOptions::new("m")
                },
            ),
        ),
    ] {
        let kept = rendered_reasoning(&body);
        assert_eq!(kept.len(), 1, "{provider}: {kept:?}");
        assert!(kept[0].contains("2+=="), "{provider}: {kept:?}");
        let report = reasoning_replay(&request, provider, "m", &plan);
        assert_eq!((report.kept, report.dropped_before_change), (1, 1));
        assert_eq!(report.changed_from, Some(3));
    }
    // Once dropped, it stays out, even in a later append-only step.
    state.advance(&request, &plan);
    let mut later = request.clone();
    later
        .messages
        .push(message("m9", Role::User, vec![text("thanks")]).into());
    let next = state.plan(&later);
    assert_eq!(next.changed_from, None);
    assert_eq!(next.reasoning_from, Some(3));
}

// ---- property test ----

#[derive(Debug, Clone)]
enum Event {
    User {
        image: bool,
    },
    Turn {
        /// Reasoning parts: (provider is Anthropic, made by the rendering model).
        reasoning: Vec<(bool, bool)>,
        text: bool,
        calls: usize,
    },
    /// Pruning: the oldest attachment message still present loses its image.
    Prune,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        1 => any::<bool>().prop_map(|image| Event::User { image }),
        3 => (
            prop::collection::vec((any::<bool>(), prop::bool::weighted(0.8)), 0..3),
            any::<bool>(),
            0usize..3
        )
            .prop_map(|(reasoning, text, calls)| Event::Turn {
                reasoning,
                text,
                calls
            }),
        1 => Just(Event::Prune),
    ]
}

/// The request after each event: a session growing by appends, edited only by pruning.
fn session(events: &[Event]) -> Vec<Request> {
    let mut history = vec![
        message("sys", Role::System, vec![text("rules")]),
        message("m0", Role::User, vec![text("start")]),
    ];
    let mut requests = Vec::new();
    for (n, e) in events.iter().enumerate() {
        match e {
            Event::User { image } => {
                history.push(message(&format!("m{n}"), Role::User, vec![text("more")]));
                if *image {
                    history.push(message(
                        &format!("att-msg-m{n}"),
                        Role::User,
                        vec![
                            text("[attachment]"),
                            Part::Image(MediaPart {
                                media_type: "image/png".into(),
                                url: format!("asset://{n}.png"),
                                bytes: 3,
                                sha256: "00".into(),
                                data: Some("iVBORw==".into()),
                            }),
                        ],
                    ));
                }
            }
            Event::Turn {
                reasoning,
                text: says,
                calls,
            } => {
                // A turn follows a user message or tool results, as in a session.
                if history.last().is_some_and(|m| m.role == Role::Assistant) {
                    history.push(message(
                        &format!("m{n}-next"),
                        Role::User,
                        vec![text("go on")],
                    ));
                }
                let mut content: Vec<Part> = reasoning
                    .iter()
                    .enumerate()
                    .map(|(k, (anthropic, own))| {
                        let provider = if *anthropic {
                            ANTHROPIC
                        } else {
                            OPENAI_RESPONSES
                        };
                        thinking(
                            provider,
                            if *own { "m" } else { "m-old" },
                            &format!("{n}-{k}"),
                        )
                    })
                    .collect();
                if *says || *calls == 0 {
                    content.push(text(&format!("answer {n}")));
                }
                content.extend((0..*calls).map(|c| call(&format!("c{n}-{c}"))));
                history.push(message(
                    &format!("s{n}-assistant"),
                    Role::Assistant,
                    content,
                ));
                if *calls > 0 {
                    history.push(message(
                        &format!("s{n}-tools"),
                        Role::Tool,
                        (0..*calls).map(|c| result(&format!("c{n}-{c}"))).collect(),
                    ));
                }
            }
            Event::Prune => {
                if let Some(m) = history.iter_mut().find(|m| {
                    m.id.starts_with("att-")
                        && m.content.iter().any(|p| matches!(p, Part::Image(_)))
                }) {
                    m.content = vec![text("[image pruned]")];
                }
            }
        }
        requests.push(Request {
            tools: tools(),
            messages: history.iter().cloned().map(std::sync::Arc::new).collect(),
        });
    }
    requests
}

#[derive(Debug, Clone, Copy)]
enum Api {
    Anthropic,
    Responses,
    Chat,
}

fn render(api: Api, request: &Request, plan: &ReplayPlan) -> Value {
    match api {
        Api::Anthropic => render_anthropic(
            request,
            &AnthropicOptions {
                reasoning_from: plan.reasoning_from,
                ..AnthropicOptions::new("m", 1024)
            },
        ),
        Api::Responses => render_responses(
            request,
            &ResponsesOptions {
                reasoning_from: plan.reasoning_from,
                ..ResponsesOptions::new("m")
            },
        ),
        Api::Chat => render_openai(request, &OpenAiOptions::new("m")),
    }
}

/// The bytes the provider's prompt cache compares, in order.
fn prefix_text(api: Api, body: &Value) -> String {
    let list = |key: &str| {
        body[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| format!("{v}\n"))
            .collect::<String>()
    };
    match api {
        Api::Anthropic => anthropic_cache_layout(body).text,
        Api::Responses => list("tools") + &list("input"),
        Api::Chat => list("tools") + &list("messages"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn signed_reasoning_is_never_modified_or_reordered_and_appends_keep_the_prefix(
        events in prop::collection::vec(event(), 1..16),
    ) {
        let requests = session(&events);
        for api in [Api::Anthropic, Api::Responses, Api::Chat] {
            let provider = match api {
                Api::Anthropic => ANTHROPIC,
                Api::Responses => OPENAI_RESPONSES,
                Api::Chat => "openai",
            };
            let mut state = ReplayState::new();
            let mut previous: Option<String> = None;
            for request in &requests {
                let plan = state.plan(request);
                let body = render(api, request, &plan);
                let valid = match api {
                    Api::Anthropic => check_anthropic(&body),
                    Api::Responses => check_responses(&body),
                    Api::Chat => check_openai(&body),
                };
                prop_assert_eq!(valid, Ok(()), "{:#}", body);
                // Every reasoning block on the wire is byte-equal to a stored one of this
                // provider and model, in the stored order, and none before the cut.
                let expected: Vec<String> = request
                    .messages
                    .iter()
                    .enumerate()
                    .flat_map(|(i, m)| m.content.iter().map(move |p| (i, p)))
                    .filter_map(|(i, p)| match p {
                        Part::Reasoning(r)
                            if r.provider == provider
                                && r.model == "m"
                                && plan.reasoning_from.is_none_or(|c| i >= c) =>
                        {
                            Some(r.data.to_string())
                        }
                        _ => None,
                    })
                    .collect();
                prop_assert_eq!(rendered_reasoning(&body), expected);
                let report = reasoning_replay(request, provider, "m", &plan);
                prop_assert_eq!(report.kept, rendered_reasoning(&body).len());
                let text = prefix_text(api, &body);
                if plan.changed_from.is_none()
                    && let Some(previous) = &previous
                {
                    prop_assert!(
                        text.starts_with(previous.as_str()),
                        "an append-only step changed the prefix:\n{}\n---\n{}",
                        previous,
                        text
                    );
                }
                state.advance(request, &plan);
                previous = Some(text);
            }
        }
    }
}
