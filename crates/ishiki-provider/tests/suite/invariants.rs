//! Property tests: any history the runtime can project — turns with calls, results,
//! attachments with or without data, catalog deltas, a front cut by pruning — renders to
//! shapes both APIs accept, with every image kept and at most four cache breakpoints.

use ishiki_core::{MediaPart, Message, Part, Request, Role, ToolSpec};
use ishiki_provider::{AnthropicOptions, OpenAiOptions, render_anthropic, render_openai};
use proptest::prelude::*;
use serde_json::json;

use super::render::{check_anthropic, check_openai};

#[derive(Debug, Clone)]
enum Event {
    User {
        images: Vec<bool>,
    },
    Turn {
        text: bool,
        calls: usize,
        errors: bool,
        images: Vec<bool>,
    },
    Delta,
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        prop::collection::vec(any::<bool>(), 0..3).prop_map(|images| Event::User { images }),
        (
            any::<bool>(),
            0usize..4,
            any::<bool>(),
            prop::collection::vec(any::<bool>(), 0..3)
        )
            .prop_map(|(text, calls, errors, images)| Event::Turn {
                text,
                calls,
                errors,
                images
            }),
        Just(Event::Delta),
    ]
}

fn message(id: String, role: Role, content: Vec<Part>) -> Message {
    Message {
        id,
        role,
        created_at: "2026-01-01T00:00:00Z".into(),
        content,
    }
}

fn images(prefix: &str, with_data: &[bool]) -> Vec<Part> {
    with_data
        .iter()
        .enumerate()
        .flat_map(|(k, data)| {
            let url = format!("artifact://t/{prefix}-{k}.png");
            [
                Part::Text {
                    text: format!("[attachment: {url}]"),
                },
                Part::Image(MediaPart {
                    media_type: "image/png".into(),
                    url,
                    bytes: 3,
                    sha256: "00".into(),
                    data: data.then(|| "iVBORw==".to_owned()),
                }),
            ]
        })
        .collect()
}

fn build(system: bool, events: &[Event], cut: usize) -> Request {
    let mut history = Vec::new();
    for (n, e) in events.iter().enumerate() {
        match e {
            Event::User { images: i } => {
                history.push(message(
                    format!("m{n}"),
                    Role::User,
                    vec![Part::Text {
                        text: format!("hello {n}"),
                    }],
                ));
                if !i.is_empty() {
                    history.push(message(
                        format!("att-msg-m{n}"),
                        Role::User,
                        images(&format!("m{n}"), i),
                    ));
                }
            }
            Event::Turn {
                text,
                calls,
                errors,
                images: i,
            } => {
                let mut content = Vec::new();
                if *text {
                    content.push(Part::Text {
                        text: format!("thinking {n}"),
                    });
                }
                for c in 0..*calls {
                    content.push(Part::ToolCall {
                        id: format!("c{n}-{c}"),
                        name: "read".into(),
                        input: json!({ "url": "x" }),
                    });
                }
                history.push(message(format!("s{n}-assistant"), Role::Assistant, content));
                if *calls > 0 {
                    let results = (0..*calls)
                        .map(|c| Part::ToolResult {
                            call_id: format!("c{n}-{c}"),
                            is_error: *errors && c == 0,
                            text: format!("result {c}"),
                        })
                        .collect();
                    history.push(message(format!("s{n}-tools"), Role::Tool, results));
                    if !i.is_empty() {
                        history.push(message(
                            format!("att-call-c{n}-0"),
                            Role::User,
                            images(&format!("c{n}"), i),
                        ));
                    }
                }
            }
            Event::Delta => history.push(message(
                format!("s{n}-catalog"),
                Role::System,
                vec![Part::Text {
                    text: format!("new tool {n}"),
                }],
            )),
        }
    }
    let cut = cut.min(history.len());
    let mut messages = Vec::new();
    if system {
        messages.push(message(
            "sys".into(),
            Role::System,
            vec![Part::Text {
                text: "rules".into(),
            }],
        ));
    }
    messages.extend(history.into_iter().skip(cut));
    Request {
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read".into(),
            input_schema: json!({ "type": "object" }),
        }],
        messages: messages.into_iter().map(std::sync::Arc::new).collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_projected_history_renders_to_accepted_shapes(
        system in any::<bool>(),
        events in prop::collection::vec(event(), 0..12),
        cut in 0usize..6,
    ) {
        let request = build(system, &events, cut);
        let openai = render_openai(&request, &OpenAiOptions::new("m"));
        prop_assert_eq!(check_openai(&openai), Ok(()), "{:#}", openai);
        let anthropic = render_anthropic(&request, &AnthropicOptions::new("m", 16));
        prop_assert_eq!(check_anthropic(&anthropic), Ok(()), "{:#}", anthropic);
        let with_data = request.messages.iter().flat_map(|m| &m.content)
            .filter(|p| matches!(p, Part::Image(m) if m.data.is_some())).count();
        prop_assert_eq!(openai.to_string().matches("\"image_url\":{").count(), with_data);
        prop_assert_eq!(anthropic.to_string().matches("\"type\":\"base64\"").count(), with_data);
    }
}
