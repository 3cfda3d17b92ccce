//! Prefix stability on rendered bytes: a 30-step session reading one new image per step with
//! lifetime `recent` (recentImageCount 3, imagePruneBatchSize 2), driven through
//! `ishiki_core::Runtime` directly. Each step without pruning must start with the previous
//! request's bytes up to its last cache breakpoint; the test prints the share of bytes reused.

use std::collections::BTreeSet;

use ishiki_core::{
    Durability, ModelResponse, ModelsDoc, Part, Profile, Request, Runtime, ToolCall, assemble,
};
use ishiki_provider::anthropic::anthropic_cache_layout;
use ishiki_provider::{AnthropicOptions, OpenAiOptions, render_anthropic, render_openai};
use serde_json::json;

use super::common::png;

const STEPS: usize = 30;

fn image_urls(request: &Request) -> BTreeSet<String> {
    request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::Image(m) => Some(m.url.clone()),
            _ => None,
        })
        .collect()
}

async fn session() -> Vec<Request> {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    for i in 1..=STEPS {
        std::fs::write(workspace.join(format!("shot{i}.png")), png(i as u32)).unwrap();
    }
    let profile = Profile::from_yaml(
        "attachment: { recentImageCount: 3, imagePruneBatchSize: 2, maxImageCount: 10 }\n",
    )
    .unwrap();
    let models =
        ModelsDoc::from_yaml("models:\n  main: { input: [text, image], toolCalling: native }\n")
            .unwrap();
    let assembly = assemble(profile, models, "main").unwrap();
    let mut runtime = Runtime::builder(assembly, dir.path().join("state"))
        .workspace_root(&workspace)
        .durability(Durability::Normal)
        .build()
        .await
        .unwrap();
    runtime
        .add_user_message("m1", "Look at each screenshot in turn.", &[])
        .await
        .unwrap();
    let mut requests = Vec::new();
    for i in 1..=STEPS {
        let prepared = runtime.prepare().await.unwrap();
        requests.push(prepared.request.clone());
        let call = ToolCall {
            id: format!("c{i}"),
            name: "read".into(),
            input: json!({ "url": format!("workspace:///shot{i}.png"), "lifetime": "recent" }),
        };
        let response = ModelResponse::from_text_and_calls(Some(format!("Step {i}.")), [call]);
        runtime.commit(prepared, response).await.unwrap();
        let reports = runtime.execute().await.unwrap();
        assert!(!reports[0].is_error, "{}", reports[0].text);
    }
    requests
}

#[tokio::test]
async fn prj_prefix_is_stable_between_prunings() {
    let requests = session().await;
    let options = AnthropicOptions::new("claude-test", 1024);
    let layouts: Vec<_> = requests
        .iter()
        .map(|r| anthropic_cache_layout(&render_anthropic(r, &options)))
        .collect();
    let (mut reused, mut total, mut prunings) = (0usize, 0usize, 0usize);
    let mut calm = (0usize, 0usize);
    for i in 1..requests.len() {
        let (prev, cur) = (&layouts[i - 1], &layouts[i]);
        let end = *prev.breakpoints.last().unwrap();
        let pruned = !image_urls(&requests[i - 1]).is_subset(&image_urls(&requests[i]));
        let kept = cur.text.starts_with(&prev.text[..end]);
        if pruned {
            prunings += 1;
        } else {
            assert!(kept, "step {}: the prefix changed without pruning", i + 1);
        }
        // Bytes the cache can serve: up to the previous breakpoint when it holds, else up to
        // the longest breakpoint of the previous request that still matches.
        let served = prev
            .breakpoints
            .iter()
            .rev()
            .find(|&&b| cur.text.starts_with(&prev.text[..b]))
            .copied()
            .unwrap_or(0);
        reused += served;
        total += cur.text.len();
        if !pruned {
            calm.0 += served;
            calm.1 += cur.text.len();
        }
    }
    let share = reused as f64 / total as f64;
    println!(
        "prefix reuse over {STEPS} steps: {reused} of {total} bytes ({:.1}%), {prunings} steps with \
         pruning; steps without pruning: {} of {} bytes ({:.1}%)",
        share * 100.0,
        calm.0,
        calm.1,
        calm.0 as f64 * 100.0 / calm.1 as f64
    );
    assert!(prunings > 0, "the session never pruned");
    assert!(share > 0.5, "share {share}");

    // OpenAI-style servers cache any common prefix by themselves: measure it on tools then
    // messages, one JSON text per line (the body's own keys are sorted, `messages` first).
    let lines = |r: &Request| {
        let body = render_openai(r, &OpenAiOptions::new("gpt-test"));
        let mut text = String::new();
        for v in body["tools"]
            .as_array()
            .into_iter()
            .chain(body["messages"].as_array())
            .flatten()
        {
            text.push_str(&v.to_string());
            text.push('\n');
        }
        text
    };
    let texts: Vec<String> = requests.iter().map(lines).collect();
    let (mut common, mut all) = (0usize, 0usize);
    for pair in texts.windows(2) {
        common += pair[0]
            .bytes()
            .zip(pair[1].bytes())
            .take_while(|(a, b)| a == b)
            .count();
        all += pair[1].len();
    }
    println!(
        "openai common prefix over {STEPS} steps: {common} of {all} bytes ({:.1}%)",
        common as f64 * 100.0 / all as f64
    );
}

/// Responses explicit breakpoints (GPT-5.6+): at most three, on input content blocks only, and
/// in a step without pruning the previous request's text up to its last breakpoint is still the
/// start of the next request, so what it wrote is read back.
#[tokio::test]
async fn responses_breakpoints_sit_on_blocks_that_stay_until_the_next_pruning() {
    let requests = session().await;
    let options = ishiki_provider::ResponsesOptions {
        cache_breakpoints: true,
        ..ishiki_provider::ResponsesOptions::new("gpt-5.6")
    };
    // Tools, then each input item, one JSON text per line, markers removed; the byte offset
    // after each item whose content holds a breakpoint.
    let layout = |r: &Request| {
        let body = ishiki_provider::render_responses(r, &options);
        assert_eq!(
            body["prompt_cache_options"],
            json!({ "mode": "implicit", "ttl": "30m" })
        );
        let mut text = String::new();
        let mut marks = Vec::new();
        for tool in body["tools"].as_array().into_iter().flatten() {
            text.push_str(&tool.to_string());
            text.push('\n');
        }
        for item in body["input"].as_array().unwrap() {
            let mut item = item.clone();
            let mut marked = false;
            for block in item
                .get_mut("content")
                .and_then(|c| c.as_array_mut())
                .into_iter()
                .flatten()
            {
                if let Some(o) = block.as_object_mut() {
                    marked |= o.remove("prompt_cache_breakpoint").is_some();
                }
            }
            assert!(
                marked || !item.to_string().contains("prompt_cache_breakpoint"),
                "a breakpoint outside input content blocks: {item}"
            );
            text.push_str(&item.to_string());
            text.push('\n');
            if marked {
                marks.push(text.len());
            }
        }
        (text, marks)
    };
    let layouts: Vec<_> = requests.iter().map(layout).collect();
    let mut calm = 0;
    for i in 1..requests.len() {
        let ((prev, marks), (cur, _)) = (&layouts[i - 1], &layouts[i]);
        assert!(!marks.is_empty() && marks.len() <= 3, "{marks:?}");
        let pruned = !image_urls(&requests[i - 1]).is_subset(&image_urls(&requests[i]));
        if !pruned {
            calm += 1;
            let end = *marks.last().unwrap();
            assert!(
                cur.starts_with(&prev[..end]),
                "step {}: the prefix up to the last breakpoint changed without pruning",
                i + 1
            );
        }
    }
    assert!(calm > 10, "{calm} steps without pruning");
}
