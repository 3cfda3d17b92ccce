//! Tools that must run as tasks (MCP 2025-11-25 "Tasks", issue 25 point 6): the reference
//! server's `simulate-research-query` declares `execution.taskSupport: "required"` and refuses
//! a plain call with `-32601`; Ishiki calls it as a task, within the tool's deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ishiki_core::{Tool, ToolContext};
use ishiki_mcp::{
    ElicitAnswer, ElicitRequest, Elicitor, McpServerConfig, server_tools, start_all_with,
};
use serde_json::{Value, json};

use super::{everything_entry, node};

fn config(timeout: Duration) -> McpServerConfig {
    McpServerConfig::new("everything", node())
        .args([everything_entry().display().to_string(), "stdio".to_owned()])
        .timeout(timeout)
}

fn context() -> ToolContext {
    ToolContext {
        call_id: "c1".to_owned(),
        step: 1,
        from_program: false,
    }
}

async fn research_tool(timeout: Duration, elicitor: Option<Arc<dyn Elicitor>>) -> Arc<dyn Tool> {
    let (servers, errors) = start_all_with(&[config(timeout)], elicitor).await;
    assert!(errors.is_empty(), "{errors:?}");
    let (tools, errors) = server_tools(&servers[0]);
    assert!(errors.is_empty(), "{errors:?}");
    tools
        .into_iter()
        .find(|t| t.definition().name == "everything_simulate-research-query")
        .expect("the task tool is listed")
}

fn text_of(result: &Value) -> String {
    result
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_tool_that_requires_a_task_is_called_as_one_and_gives_its_result() {
    let tool = research_tool(Duration::from_secs(30), None).await;
    let result = tool
        .execute(json!({ "topic": "tide pools" }), &context())
        .await
        .expect("the task's result");
    let text = text_of(&result);
    assert!(text.contains("# Research Report: tide pools"), "{result}");
    // The second call goes to the task at once (the first one learnt the tool needs it).
    let again = tool
        .execute(json!({ "topic": "kelp" }), &context())
        .await
        .expect("the second task's result");
    assert!(
        text_of(&again).contains("# Research Report: kelp"),
        "{again}"
    );
}

#[tokio::test]
async fn a_task_past_the_tool_deadline_fails_at_the_deadline_naming_it() {
    // The task takes four stages of a second each.
    let tool = research_tool(Duration::from_millis(1_500), None).await;
    let started = Instant::now();
    let e = tool
        .execute(json!({ "topic": "slow" }), &context())
        .await
        .expect_err("past the deadline");
    let took = started.elapsed();
    assert!(took < Duration::from_millis(3_500), "took {took:?}");
    let message = e.to_string();
    assert!(message.contains("1500 ms"), "{message}");
}

/// Answers the clarification a task asks for with the first interpretation offered.
#[derive(Debug)]
struct FirstChoice;

#[async_trait]
impl Elicitor for FirstChoice {
    async fn elicit(&self, request: ElicitRequest) -> ElicitAnswer {
        let ElicitRequest::Form { schema, .. } = request else {
            return ElicitAnswer::Decline;
        };
        let first = schema["properties"]["interpretation"]["oneOf"][0]["const"].clone();
        let mut answer = serde_json::Map::new();
        answer.insert("interpretation".to_owned(), first);
        ElicitAnswer::Accept(answer)
    }
}

#[tokio::test]
async fn a_task_that_needs_input_asks_the_elicitor_and_goes_on() {
    let tool = research_tool(Duration::from_secs(30), Some(Arc::new(FirstChoice))).await;
    let result = tool
        .execute(json!({ "topic": "python", "ambiguous": true }), &context())
        .await
        .expect("the task's result");
    let text = text_of(&result);
    assert!(text.contains("**Clarification**"), "{result}");
    assert!(!text.contains("elicitation unavailable"), "{result}");
}

#[tokio::test]
async fn a_task_cut_at_the_deadline_is_cancelled_on_the_server() {
    let config = super::fake_config("tasks", "tasks", Duration::from_millis(600));
    let (servers, errors) = start_all_with(&[config], None).await;
    assert!(errors.is_empty(), "{errors:?}");
    let (tools, errors) = server_tools(&servers[0]);
    assert!(errors.is_empty(), "{errors:?}");
    let find = |name: &str| {
        tools
            .iter()
            .find(|t| t.definition().name == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} is listed"))
    };
    let (slow, cancelled) = (find("tasks_slow"), find("tasks_cancelled"));
    let e = slow
        .execute(json!({}), &context())
        .await
        .expect_err("the task never ends");
    assert!(e.to_string().contains("600 ms"), "{e}");
    // The cancel is sent as the call is cut, on its own; it reaches the server soon after,
    // and the server was not stopped for a task that ran long.
    let mut seen = String::new();
    for _ in 0..50 {
        let answer = cancelled
            .execute(json!({}), &context())
            .await
            .expect("the list of cancelled tasks");
        seen = text_of(&answer);
        if seen != "[]" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, r#"["task-1"]"#, "the server was not told to cancel");
}
