//! Task-augmented tool calls (MCP 2025-11-25, "Tasks"): a tool whose `execution.taskSupport`
//! is `"required"` refuses a plain `tools/call` with `-32601`; such a call is made again as a
//! task.
//!
//! rmcp 3.11's typed `Tool` has no `execution` field (it models the 2026 revision's tasks), so
//! the listing cannot say which tools need a task; the server's refusal does, and
//! [`McpServer`](super::McpServer) remembers the tool so its later calls are tasks at once. The
//! flow: `tools/call` with `task: { ttl }` answers with the created task; `tasks/result` then
//! waits for the task to end and answers with the tool's result (an elicitation the task needs
//! arrives on the way and goes to the embedder's elicitor like any other). The whole of it runs
//! under the call's deadline: a call cut there (or dropped) sends `tasks/cancel`, best effort,
//! so the server stops the work. A cut after the server made the task is the task's, not a
//! hung server's: the session is kept (a timeout elsewhere stops the server).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientRequest, CustomRequest, CustomResult, ErrorCode, ServerResult,
};
use rmcp::service::{Peer, RoleClient, ServiceError};
use serde_json::{Value, json};

use super::Failure;

/// The longest task id kept (a server's id is echoed back in every request about it).
const MAX_TASK_ID_CHARS: usize = 256;
/// How long the `tasks/cancel` of a cut call may take.
const CANCEL_DEADLINE: Duration = Duration::from_secs(5);

/// Whether `answer` is a server's refusal of a plain call to a tool that must run as a task:
/// "Method not found" (`-32601`) answering `tools/call`, as the 2025-11-25 revision says, or
/// that same error turned into a tool error by the TypeScript SDK's `McpServer` (which
/// answers `isError: true` with the single text `MCP error -32601: …`).
pub(super) fn needs_task(answer: &Result<Value, Failure>) -> bool {
    match answer {
        Err(Failure::Service(ServiceError::McpError(e))) => e.code == ErrorCode::METHOD_NOT_FOUND,
        Err(_) => false,
        Ok(result) => {
            result.get("isError") == Some(&Value::Bool(true))
                && result
                    .get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|blocks| {
                        blocks.len() == 1
                            && blocks[0]
                                .get("text")
                                .and_then(Value::as_str)
                                .is_some_and(|t| t.starts_with("MCP error -32601:"))
                    })
        }
    }
}

/// Why a task-augmented call gave no result.
pub(super) enum TaskFailure {
    /// The server made no task of the call (it may not speak tasks at all).
    NotCreated(Failure),
    /// The task was made, then failed, was cancelled or its result was unusable.
    Failed(Failure),
}

impl From<TaskFailure> for Failure {
    fn from(failure: TaskFailure) -> Self {
        match failure {
            TaskFailure::NotCreated(f) | TaskFailure::Failed(f) => f,
        }
    }
}

/// One task-augmented call of `params`, its result in the wire shape; `ttl` is the call's
/// deadline, which is how long the server needs to keep the task. `made` is set once the
/// server made the task (a cut after that cancels a running task; the server did not hang).
pub(super) async fn call_as_task(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    ttl: Duration,
    made: &AtomicBool,
) -> Result<Value, TaskFailure> {
    let unusable = |e: serde_json::Error| Failure::Refused(format!("cannot send the call: {e}"));
    let mut raw = serde_json::to_value(&params)
        .map_err(unusable)
        .map_err(TaskFailure::NotCreated)?;
    if let Value::Object(map) = &mut raw {
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        map.insert("task".to_owned(), json!({ "ttl": ttl }));
    }
    let created = send(peer, "tools/call", raw)
        .await
        .map_err(TaskFailure::NotCreated)?;
    // A server may run a short call at once and answer with the result itself.
    if is_tool_result(&created) {
        return Ok(created);
    }
    let id = task_id(&created).map_err(TaskFailure::NotCreated)?;
    let mut guard = CancelOnDrop {
        peer: peer.clone(),
        id: Some(id.clone()),
    };
    made.store(true, Ordering::SeqCst);
    let result = send(peer, "tasks/result", json!({ "taskId": id })).await;
    // Ended one way or the other: nothing is left to cancel (a failed or cancelled task
    // answers `tasks/result` with its error).
    guard.id = None;
    let result = result.map_err(TaskFailure::Failed)?;
    if is_tool_result(&result) {
        Ok(result)
    } else {
        Err(TaskFailure::Failed(Failure::Refused(
            "the result of its task is not a tool result (no `content`, `structuredContent` or `isError`)"
                .to_owned(),
        )))
    }
}

/// `method` with `params` as a raw request, its answer as JSON (rmcp types an answer by its
/// shape alone; the shape is all that is read here).
async fn send(peer: &Peer<RoleClient>, method: &str, params: Value) -> Result<Value, Failure> {
    let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
    match peer.send_request(request).await? {
        ServerResult::CustomResult(CustomResult(raw)) => Ok(raw),
        typed => serde_json::to_value(&typed)
            .map_err(|e| Failure::Refused(format!("cannot read its answer to `{method}`: {e}"))),
    }
}

fn is_tool_result(value: &Value) -> bool {
    ["content", "structuredContent", "isError"]
        .iter()
        .any(|key| value.get(key).is_some())
}

/// The id of the task a `CreateTaskResult` (`{ task: { taskId, status, … } }`) describes.
fn task_id(created: &Value) -> Result<String, Failure> {
    let id = created
        .get("task")
        .and_then(|t| t.get("taskId"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            Failure::Refused(
                "its answer to a task-augmented call names no task (`task.taskId`)".to_owned(),
            )
        })?;
    if id.is_empty() || id.chars().count() > MAX_TASK_ID_CHARS || id.chars().any(char::is_control) {
        return Err(Failure::Refused(format!(
            "the task id it gave is empty, longer than {MAX_TASK_ID_CHARS} characters or holds control characters"
        )));
    }
    Ok(id.to_owned())
}

/// Sends `tasks/cancel` for a task whose call was cut (deadline, or the step dropped).
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<String>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let request = ClientRequest::CustomRequest(CustomRequest::new(
                "tasks/cancel",
                Some(json!({ "taskId": id })),
            ));
            // Best effort: the server may have ended the task, or the connection with it.
            let _ = tokio::time::timeout(CANCEL_DEADLINE, peer.send_request(request)).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_task_gives_its_id_and_a_hostile_one_is_refused() {
        let created = json!({ "task": { "taskId": "t-1", "status": "working" } });
        assert_eq!(task_id(&created).ok().as_deref(), Some("t-1"));
        for bad in [
            json!({}),
            json!({ "task": { "taskId": 7 } }),
            json!({ "task": { "taskId": "" } }),
            json!({ "task": { "taskId": "a\nb" } }),
            json!({ "task": { "taskId": "x".repeat(257) } }),
        ] {
            assert!(task_id(&bad).is_err(), "{bad}");
        }
    }
}
