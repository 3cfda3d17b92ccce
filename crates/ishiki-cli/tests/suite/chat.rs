//! `ishiki chat` end to end against a local server replaying OpenAI-style responses, driven
//! through standard input (issue 10).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// Serves `responses` in order on 127.0.0.1 and records each request body.
fn replay(responses: Vec<String>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port");
    let addr = listener.local_addr().expect("an address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for (stream, body) in listener.incoming().zip(responses) {
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
            let reply = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    (format!("http://{addr}/v1"), seen)
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

/// SEC-2: the README's old `--state .ishiki --workspace .` let the model read its own history
/// through `workspace:///.ishiki/history.sqlite`; such a state directory is refused at start.
#[test]
fn chat_refuses_a_state_dir_inside_the_workspace() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(&workspace).expect("workspace");
    std::fs::write(dir.path().join("profile.yaml"), "{}\n").expect("profile");
    // Never contacted: the session is refused before the first request.
    std::fs::write(
        dir.path().join("models.yaml"),
        "models:\n  main: { input: [text], provider: openai, baseUrl: \"http://127.0.0.1:9/v1\", model: test-model }\n",
    )
    .expect("models");
    let output = Command::new(env!("CARGO_BIN_EXE_ishiki"))
        .arg("chat")
        .arg("--profile")
        .arg(dir.path().join("profile.yaml"))
        .arg("--models")
        .arg(dir.path().join("models.yaml"))
        .arg("--state")
        .arg(workspace.join(".ishiki"))
        .arg("--workspace")
        .arg(&workspace)
        .stdin(Stdio::null())
        .output()
        .expect("ishiki chat runs");
    let canonical = std::fs::canonicalize(dir.path()).expect("a canonical path");
    let stderr =
        String::from_utf8_lossy(&output.stderr).replace(&canonical.display().to_string(), "[tmp]");
    assert_eq!(
        (output.status.code(), stderr.as_str()),
        (
            Some(1),
            "ishiki: the state directory [tmp]/ws/.ishiki is inside the workspace root [tmp]/ws, where the model could read and change its history; keep the state directory outside every workspace and local root\n"
        )
    );
    assert!(!workspace.join(".ishiki").exists(), "nothing was created");
}
