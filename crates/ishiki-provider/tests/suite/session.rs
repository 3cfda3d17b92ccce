//! A long live session against the enforcing fakes (`fake.rs`): the real runtime and the real
//! HTTP model, 200 steps with thinking in every answer, `once`, `recent` and `retain` images,
//! tool discovery by `search`, a tool that joins mid-session (an MCP list change), and tool
//! loops ended by user turns. The fake must accept every request; the figures (thinking kept
//! and dropped, cache-prefix breaks, bytes re-sent) are printed for both edit policies.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::{
    Durability, EditPolicy, ModelsDoc, Profile, Runtime, Tool, ToolContext, ToolDef, ToolError,
    assemble,
};
use ishiki_provider::{HttpConfig, HttpModel, Protocol};
use serde_json::{Value, json};

use super::common::png;
use super::fake::{Api, start};

const STEPS: usize = 200;

/// A tool found by search (deferred), or joining mid-session (resident).
#[derive(Debug)]
struct Forecast {
    name: &'static str,
    resident: bool,
}

#[async_trait]
impl Tool for Forecast {
    fn definition(&self) -> ToolDef {
        ToolDef {
            resident: self.resident,
            ..ToolDef::new(
                self.name,
                "Weather forecast for a city, by day",
                json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
            )
        }
    }

    async fn execute(&self, input: Value, _: &ToolContext) -> Result<Value, ToolError> {
        Ok(json!({ "city": input["city"], "forecast": "sunny" }))
    }
}

/// What the scripted model calls at request `n` (1-based): a tool loop of seven calls, then an
/// answer that ends the turn.
fn call_for(n: usize, discovered: bool, joined: bool) -> Option<(String, Value)> {
    let image = |lifetime: &str| {
        Some((
            "read".to_owned(),
            json!({ "url": format!("workspace:///shot{}.png", n % 40), "lifetime": lifetime }),
        ))
    };
    match n % 8 {
        0 => None,
        1 => image("once"),
        2 => image("recent"),
        3 if !discovered => Some((
            "search".to_owned(),
            json!({ "query": "select:weather_forecast" }),
        )),
        3 if n % 32 == 3 => image("retain"),
        3 => image("recent"),
        4 if discovered => Some(("weather_forecast".to_owned(), json!({ "city": "Lisbon" }))),
        5 if joined => Some(("air_quality".to_owned(), json!({ "city": "Porto" }))),
        6 => image("recent"),
        _ => Some((
            "read".to_owned(),
            json!({ "url": "workspace:///notes.txt" }),
        )),
    }
}

#[derive(Debug)]
struct Figures {
    requests: usize,
    rejected: Vec<String>,
    /// Thinking blocks the fake saw (valid) over all requests, and the thinking blocks a
    /// request left out that the request before it carried or its answer made (lost).
    thinking_sent: usize,
    thinking_left_out: usize,
    /// Of the thinking made in the session, how much the last request still carried.
    final_kept: usize,
    final_made: usize,
    cache_breaks: usize,
    bytes_resent: usize,
}

async fn session(api: Api, policy: EditPolicy, steps: usize) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    for i in 0..40 {
        std::fs::write(workspace.join(format!("shot{i}.png")), png(i)).unwrap();
    }
    std::fs::write(workspace.join("notes.txt"), "milk, eggs\n").unwrap();
    let profile = Profile::from_yaml(
        "attachment: { recentImageCount: 3, imagePruneBatchSize: 2, maxImageCount: 12 }\ntoolsearch: { enable: true }\n",
    )
    .unwrap();
    let models =
        ModelsDoc::from_yaml("models:\n  main: { input: [text, image], toolCalling: native }\n")
            .unwrap();
    let assembly = assemble(profile, models, "main").unwrap();
    let mut runtime = Runtime::builder(assembly, dir.path().join("state"))
        .workspace_root(&workspace)
        .durability(Durability::Normal)
        .edit_policy(policy)
        .tool(Arc::new(Forecast {
            name: "weather_forecast",
            resident: false,
        }))
        .build()
        .await
        .unwrap();
    runtime
        .add_user_message("m0", "Look at the screenshots and check the weather.", &[])
        .await
        .unwrap();

    let protocol = match api {
        Api::Anthropic => Protocol::Anthropic,
        Api::Responses => Protocol::OpenAiResponses,
    };
    let (url, log) = start(
        api,
        Box::new(move |n, body| {
            let text = body.to_string();
            let discovered = text.contains("\"name\":\"weather_forecast\"");
            let joined = text.contains("\"name\":\"air_quality\"");
            let call = call_for(n, discovered, joined);
            match api {
                Api::Anthropic => {
                    let mut content = vec![json!({ "type": "thinking",
                        "thinking": if n % 3 == 0 { String::new() } else { format!("step {n}") },
                        "signature": "" })];
                    content.push(match call {
                        Some((name, input)) => json!({ "type": "tool_use",
                            "id": format!("toolu_{n}"), "name": name, "input": input }),
                        None => json!({ "type": "text", "text": format!("Done with turn {n}.") }),
                    });
                    content
                }
                Api::Responses => {
                    let mut output = vec![json!({ "type": "reasoning", "id": format!("rs_{n}"),
                        "summary": [], "encrypted_content": format!("enc-{n}") })];
                    output.push(match call {
                        Some((name, input)) => json!({ "type": "function_call",
                            "id": format!("fc_{n}"), "call_id": format!("call_{n}"),
                            "name": name, "arguments": input.to_string() }),
                        None => json!({ "type": "message", "role": "assistant", "id": format!("msg_{n}"),
                            "content": [{ "type": "output_text", "text": format!("Done with turn {n}.") }] }),
                    });
                    output
                }
            }
        }),
    )
    .await;
    let model = HttpModel::new(HttpConfig {
        stream: false,
        max_retries: 0,
        backoff: Duration::ZERO,
        timeout: Duration::from_secs(30),
        preserved_thinking: true,
        drop_invalid_thinking: false,
        system_messages: true,
        ..HttpConfig::new(protocol, &url, "claude-opus-5-5")
    })
    .unwrap();

    let mut made = 0usize;
    let mut left_out = 0usize;
    let (mut carried, mut last_made) = (0usize, 0usize);
    for step in 1..=steps {
        if step == steps / 2 {
            // An MCP server lists a new tool: it joins the catalog mid-session.
            runtime
                .add_tool(Arc::new(Forecast {
                    name: "air_quality",
                    resident: true,
                }))
                .unwrap();
        }
        let prepared = runtime.prepare().await.unwrap();
        if std::env::var_os("ISHIKI_DEBUG_BREAKS").is_some() && step < 40 {
            let images = prepared
                .request
                .messages
                .iter()
                .flat_map(|m| &m.content)
                .filter(|p| matches!(p, ishiki_core::Part::Image(_)))
                .count();
            eprintln!(
                "step {step}: {:?} images {images} msgs {}",
                prepared.edits,
                prepared.request.messages.len()
            );
        }
        let sent = prepared
            .request
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter(|p| matches!(p, ishiki_core::Part::Reasoning(_)))
            .count();
        let parsed = model.send(&prepared.request).await;
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(e) => {
                runtime.abandon(prepared);
                panic!("step {step}: the fake refused the request: {e}");
            }
        };
        // Thinking the previous request carried, or its answer made, that this one leaves out.
        left_out += (carried + last_made).saturating_sub(parsed.replay.kept);
        carried = parsed.replay.kept;
        debug_assert!(sent >= parsed.replay.kept);
        last_made = parsed.response.reasoning().count();
        made += last_made;
        runtime.commit(prepared, parsed.response).await.unwrap();
        let reports = runtime.execute().await.unwrap();
        for r in &reports {
            assert!(!r.is_error, "step {step}: {}", r.text);
        }
        if reports.is_empty() {
            runtime
                .add_user_message(&format!("m{step}"), "Next, please.", &[])
                .await
                .unwrap();
        }
    }
    let log = log.lock().unwrap();
    let (mut cache_breaks, mut bytes_resent) = (0, 0);
    for (at, pair) in log.layouts.windows(2).enumerate() {
        let common = pair[0]
            .bytes()
            .zip(pair[1].bytes())
            .take_while(|(a, b)| a == b)
            .count();
        if common < pair[0].len() {
            cache_breaks += 1;
            if std::env::var_os("ISHIKI_DEBUG_BREAKS").is_some() && cache_breaks < 12 {
                let line_start = pair[0][..common].rfind('\n').map_or(0, |i| i + 1);
                let old: String = pair[0][line_start..].chars().take(160).collect();
                let new: String = pair[1][line_start..].chars().take(160).collect();
                eprintln!(
                    "break {cache_breaks} at request {}:\n  old {}\n  new {}",
                    at + 2,
                    old.replace('\n', " | "),
                    new.replace('\n', " | ")
                );
            }
        }
        bytes_resent += pair[1].len() - common;
    }
    let final_kept = match api {
        Api::Anthropic => log.bodies.last().map_or(0, |b| {
            b.to_string().matches("\"type\":\"thinking\"").count()
        }),
        Api::Responses => log.bodies.last().map_or(0, |b| {
            b.to_string().matches("\"type\":\"reasoning\"").count()
        }),
    };
    Figures {
        requests: log.requests,
        rejected: log.rejected.clone(),
        thinking_sent: log.thinking_valid,
        thinking_left_out: left_out,
        final_kept,
        final_made: made.saturating_sub(1),
        cache_breaks,
        bytes_resent,
    }
}

#[tokio::test]
async fn a_200_step_session_with_thinking_images_discovery_and_a_list_change_is_never_refused() {
    let held = session(Api::Anthropic, EditPolicy::AtUserTurns, STEPS).await;
    let immediate = session(Api::Anthropic, EditPolicy::Immediate, STEPS).await;
    for (name, f) in [("at user turns", &held), ("immediate", &immediate)] {
        let per100 = |n: usize| n as f64 * 100.0 / f.requests as f64;
        println!(
            "anthropic, edits {name}: {} requests, {} refused; thinking kept at the end {}/{}; \
             thinking sent {:.0} and lost {:.0} per 100 steps; cache-prefix breaks {:.1} per \
             100 steps; {} KiB re-sent",
            f.requests,
            f.rejected.len(),
            f.final_kept,
            f.final_made,
            per100(f.thinking_sent),
            per100(f.thinking_left_out),
            per100(f.cache_breaks),
            f.bytes_resent / 1024
        );
        assert_eq!(f.rejected, Vec::<String>::new(), "{name}");
        assert_eq!(f.requests, STEPS);
    }
    // Holding edits inside tool loops keeps each loop's thinking live to its end (more of it
    // reaches the model) and breaks the cache less often.
    assert!(
        held.thinking_sent > immediate.thinking_sent,
        "{held:?} vs {immediate:?}"
    );
    assert!(
        held.cache_breaks < immediate.cache_breaks,
        "{held:?} vs {immediate:?}"
    );
}

#[tokio::test]
async fn a_responses_session_always_sends_each_reasoning_item_with_its_following_item() {
    let f = session(Api::Responses, EditPolicy::Immediate, 80).await;
    println!(
        "responses: {} requests, {} refused; reasoning kept at the end {}/{}",
        f.requests,
        f.rejected.len(),
        f.final_kept,
        f.final_made
    );
    assert_eq!(f.rejected, Vec::<String>::new());
    // Nothing binds Responses reasoning to its prefix: all of it is replayed.
    assert_eq!(f.thinking_left_out, 0);
    assert_eq!(f.final_kept, f.final_made);
}
