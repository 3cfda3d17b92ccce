//! The state directory as the runtime opens it (SEC-2, SEC-4): never inside a root the model
//! can read, one runtime at a time, never silently restarted over a lost history, and every
//! stored row read strictly.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use ishiki_core::{Durability, ModelResponse, Runtime, RuntimeError, RuntimeErrorKind, ToolCall};
use serde_json::json;

use super::runtime::{assembly, clock_at, png};
use super::with_snapshots;

fn builder(dir: &Path) -> ishiki_core::RuntimeBuilder {
    Runtime::builder(assembly("", "seeing"), dir)
        .clock(clock_at(Duration::ZERO))
        .durability(Durability::Normal)
}

async fn open(dir: &Path) -> Result<Runtime, RuntimeError> {
    builder(dir).build().await
}

/// `message` with the temporary directory's path (as given and canonical) replaced by `[tmp]`.
fn redact(message: &str, tmp: &Path) -> String {
    let canonical = std::fs::canonicalize(tmp).expect("a canonical path");
    message
        .replace(&canonical.display().to_string(), "[tmp]")
        .replace(&tmp.display().to_string(), "[tmp]")
}

/// A conversation of two steps: an inbound image (an asset), a read of a workspace image (an
/// artifact and an attachment record) and a committed delivery.
async fn converse(dir: &Path) {
    let mut rt = open(dir).await.expect("the runtime opens");
    rt.add_user_message("u1", "look", &[png(4, 4, 1)])
        .await
        .expect("a user message");
    rt.workspace()
        .write("/home/workspace/a.png", &png(5, 3, 2))
        .expect("a workspace image");
    let prepared = rt.prepare().await.expect("a request");
    rt.commit(
        prepared,
        ModelResponse::from_calls(vec![ToolCall {
            id: "c1".to_owned(),
            name: "read".to_owned(),
            input: json!({ "url": "workspace:///home/workspace/a.png", "lifetime": "once" }),
        }]),
    )
    .await
    .expect("a commit");
    rt.execute().await.expect("the read runs");
    let prepared = rt.prepare().await.expect("a second request");
    rt.commit(prepared, ModelResponse::from_text("seen".to_owned()))
        .await
        .expect("a second commit");
}

// ---------------------------------------------------------------------------------------------
// Roots (SEC-2).

#[tokio::test]
async fn sec2_a_state_dir_the_model_could_reach_is_refused_before_anything_is_created() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).expect("ws");
    let mut report = Vec::new();
    let mut refused = async |name: &str, state: &Path, b: ishiki_core::RuntimeBuilder| {
        let error = b.build().await.expect_err(name);
        assert_eq!(error.kind(), RuntimeErrorKind::Config, "{name}");
        assert!(
            !state.exists(),
            "{name}: the refused state directory was created"
        );
        report.push(format!(
            "{name}:\n  {}",
            redact(error.message(), tmp.path())
        ));
    };
    let state = ws.join(".ishiki");
    refused(
        "inside the workspace",
        &state,
        builder(&state).workspace_root(&ws),
    )
    .await;
    let state = ws.join("deep/er/state");
    refused(
        "deep inside the workspace, through a path with dots",
        &state,
        builder(&state).workspace_root(tmp.path().join("ws/deep/../.")),
    )
    .await;
    let docs = tmp.path().join("docs");
    let state = docs.join("state");
    refused(
        "inside a local root",
        &state,
        builder(&state)
            .workspace_root(&ws)
            .local_root("docs", &docs),
    )
    .await;
    let state = tmp.path().join("state");
    refused(
        "a workspace inside the artifact store",
        &state,
        builder(&state).workspace_root(state.join("artifacts/x")),
    )
    .await;
    #[cfg(unix)]
    {
        // A symlink to the workspace is the workspace.
        std::os::unix::fs::symlink(&ws, tmp.path().join("ws_link")).expect("a link");
        let state = tmp.path().join("ws_link/state");
        refused(
            "inside the workspace through a symlink",
            &state,
            builder(&state).workspace_root(&ws),
        )
        .await;
    }
    with_snapshots(|| insta::assert_snapshot!("state_dir_roots_refused", report.join("\n")));

    // Beside the workspace, or the default workspace inside the state directory: fine.
    open(&tmp.path().join("beside"))
        .await
        .expect("the default workspace is inside the state");
    builder(&tmp.path().join("beside2"))
        .workspace_root(&ws)
        .local_root("docs", &docs)
        .build()
        .await
        .expect("a state directory beside the roots");
}

#[tokio::test]
async fn sec2_every_declared_store_location_is_checked_against_every_root() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let ws = tmp.path().join("ws");
    let docs = tmp.path().join("docs");
    let objects = tmp.path().join("objects");
    for dir in [&ws, &docs, &objects] {
        std::fs::create_dir(dir).expect("a directory");
    }
    let state = tmp.path().join("state");
    let mut report = Vec::new();
    let mut refused = async |name: &str, b: ishiki_core::RuntimeBuilder| {
        let error = b.build().await.expect_err(name);
        assert_eq!(error.kind(), RuntimeErrorKind::Config, "{name}");
        report.push(format!(
            "{name}:\n  {}",
            redact(error.message(), tmp.path())
        ));
    };
    refused(
        "an object store inside the workspace",
        builder(&state)
            .workspace_root(&ws)
            .store_location("the object store", ws.join("objects")),
    )
    .await;
    refused(
        "a socket directory inside a local root",
        builder(&state)
            .workspace_root(&ws)
            .local_root("docs", &docs)
            .store_location("the postgres socket directory", docs.join("run")),
    )
    .await;
    refused(
        "a workspace inside the object store",
        builder(&state)
            .workspace_root(objects.join("ws"))
            .store_location("the object store", &objects),
    )
    .await;
    refused(
        "an object store equal to the workspace",
        builder(&state)
            .workspace_root(&ws)
            .store_location("the object store", &ws),
    )
    .await;
    with_snapshots(|| insta::assert_snapshot!("store_locations_refused", report.join("\n")));

    builder(&state)
        .workspace_root(&ws)
        .local_root("docs", &docs)
        .store_location("the object store", &objects)
        .build()
        .await
        .expect("an object store beside the roots");
}

/// Issue 24: renaming the state directory mid-run ended with exit 0 while history went on in
/// the moved directory and artifacts were written under the old path. The next commit now
/// fails with an error naming the directory, and nothing is recreated under the old path.
#[tokio::test]
async fn sec4_a_state_dir_moved_mid_run_stops_the_next_commit_with_an_error_naming_it() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("state");
    let mut rt = open(&dir).await.expect("the runtime opens");
    rt.add_user_message("u1", "hello", &[])
        .await
        .expect("a message before the move");
    let prepared = rt.prepare().await.expect("a request");
    std::fs::rename(&dir, tmp.path().join("moved")).expect("the state directory moves");
    let error = rt
        .commit(prepared, ModelResponse::from_text("hi".to_owned()))
        .await
        .expect_err("the commit after the move fails");
    assert_eq!(error.kind(), RuntimeErrorKind::Io);
    assert_eq!(
        redact(error.message(), tmp.path()),
        "the state directory [tmp]/state was moved or deleted while the runtime ran; stopping so that no history or artifact is written to the wrong place (move it back, or start again from where it is now)"
    );
    let error = rt
        .add_user_message("u2", "again", &[png(4, 4, 1)])
        .await
        .expect_err("and so does every later write");
    assert_eq!(error.kind(), RuntimeErrorKind::Io);
    assert!(!dir.exists(), "nothing was recreated under the old path");

    // Deleted and recreated empty under the same name: another directory, refused too.
    let dir = tmp.path().join("state2");
    let mut rt = open(&dir).await.expect("the runtime opens");
    std::fs::rename(&dir, tmp.path().join("moved2")).expect("moved");
    std::fs::create_dir(&dir).expect("an empty directory in its place");
    let error = rt
        .add_user_message("u1", "hello", &[])
        .await
        .expect_err("a replaced state directory is refused");
    assert!(
        error
            .message()
            .contains("was replaced by another directory"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// The lock (SEC-4).

#[tokio::test]
async fn sec4_a_state_dir_serves_one_runtime_at_a_time_and_names_the_holder() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("state");
    let first = open(&dir).await.expect("the first runtime opens");
    let error = open(&dir).await.expect_err("a second runtime is refused");
    assert_eq!(error.kind(), RuntimeErrorKind::Busy);
    assert!(error.is_retryable(), "the holder may let go");
    let pid = std::process::id();
    assert_eq!(
        redact(error.message(), tmp.path()),
        format!(
            "the state directory [tmp]/state is in use by another runtime (pid {pid}, this process); a state directory serves one runtime at a time"
        )
    );
    drop(first);
    let again = open(&dir)
        .await
        .expect("the lock is released with the runtime");
    drop(again);
}

const LOCK_CHILD_DIR: &str = "ISHIKI_CORE_LOCK_CHILD_STATE";

/// The child of the test below (its own binary run again with [`LOCK_CHILD_DIR`] set): holds a
/// runtime on the state directory `dir` until its stdin closes.
async fn hold_the_state_dir(dir: &str) {
    let rt = open(Path::new(&dir))
        .await
        .expect("the child opens the state directory");
    let mut out = std::io::stdout().lock();
    // The harness has printed `test … ` without a newline: end that line first.
    writeln!(out)
        .and_then(|()| writeln!(out, "locked"))
        .expect("stdout");
    out.flush().expect("stdout");
    let mut rest = String::new();
    let _ = std::io::stdin().read_line(&mut rest);
    drop(rt);
}

#[tokio::test]
async fn sec4_another_process_holding_the_state_dir_is_named_by_its_pid() {
    if let Ok(dir) = std::env::var(LOCK_CHILD_DIR) {
        return hold_the_state_dir(&dir).await;
    }
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("state");
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "suite::state_dir::sec4_another_process_holding_the_state_dir_is_named_by_its_pid",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(LOCK_CHILD_DIR, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the child starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .map_while(Result::ok);
    assert!(
        lines.by_ref().any(|line| line == "locked"),
        "the child took the lock"
    );
    let error = open(&dir)
        .await
        .expect_err("refused while the child holds the lock");
    assert_eq!(
        redact(error.message(), tmp.path()),
        format!(
            "the state directory [tmp]/state is in use by another runtime (pid {}); a state directory serves one runtime at a time",
            child.id()
        )
    );
    drop(child.stdin.take()); // the child drops its runtime and ends
    lines.for_each(drop); // read to the end, so the child's last lines are not written into a closed pipe
    let status = child.wait().expect("the child ends");
    assert!(status.success(), "{status}");
    open(&dir)
        .await
        .expect("free again once the holder is gone");
}

// ---------------------------------------------------------------------------------------------
// A lost history (SEC-4).

#[tokio::test]
async fn sec4_a_lost_history_is_an_error_not_a_new_conversation() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let mut report = Vec::new();
    let mut refused = async |name: &str, dir: &Path| {
        let before = std::fs::metadata(dir.join("history.sqlite")).map(|m| m.len());
        let error = open(dir).await.expect_err(name);
        assert_eq!(error.kind(), RuntimeErrorKind::Damaged, "{name}: {error}");
        assert!(!error.is_retryable(), "{name}");
        report.push(format!(
            "{name}:\n  {}",
            redact(error.message(), tmp.path())
        ));
        // The evidence is left as it was found.
        let after = std::fs::metadata(dir.join("history.sqlite")).map(|m| m.len());
        assert_eq!(
            before.as_ref().ok(),
            after.as_ref().ok(),
            "{name}: the history file changed"
        );
    };
    let remove_db = |dir: &Path| {
        for name in ["history.sqlite", "history.sqlite-wal", "history.sqlite-shm"] {
            let _ = std::fs::remove_file(dir.join(name));
        }
    };

    let dir = tmp.path().join("emptied");
    converse(&dir).await;
    remove_db(&dir);
    std::fs::write(dir.join("history.sqlite"), b"").expect("a 0-byte database");
    refused("0-byte history, marker present", &dir).await;

    let dir = tmp.path().join("legacy");
    converse(&dir).await;
    remove_db(&dir);
    std::fs::remove_file(dir.join("ishiki.conversation")).expect("the marker");
    std::fs::write(dir.join("history.sqlite"), b"").expect("a 0-byte database");
    refused(
        "0-byte history, no marker, artifacts and assets present",
        &dir,
    )
    .await;
    std::fs::remove_dir_all(dir.join("artifacts")).expect("artifacts");
    refused("0-byte history, no marker, assets present", &dir).await;

    let dir = tmp.path().join("deleted");
    converse(&dir).await;
    remove_db(&dir);
    refused("history deleted", &dir).await;

    with_snapshots(|| insta::assert_snapshot!("state_dir_lost_history", report.join("\n")));
}

#[tokio::test]
async fn sec4_a_history_whose_write_ahead_log_was_lost_is_an_error() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("state");
    let mut rt = open(&dir).await.expect("the runtime opens");
    rt.add_user_message("u1", "look", &[png(4, 4, 1)])
        .await
        .expect("a user message");
    let prepared = rt.prepare().await.expect("a request");
    rt.commit(prepared, ModelResponse::from_text("seen".to_owned()))
        .await
        .expect("a commit");
    // Killed now, with the commits only in the write-ahead log (no checkpoint yet), and the
    // log then deleted: what is left is the main file and the rest of the directory.
    let lost = tmp.path().join("lost");
    std::fs::create_dir(&lost).expect("a copy");
    for name in ["history.sqlite", "ishiki.conversation"] {
        std::fs::copy(dir.join(name), lost.join(name)).expect("a copied file");
    }
    drop(rt);
    let error = open(&lost)
        .await
        .expect_err("a history without its log is refused");
    assert_eq!(
        redact(error.message(), tmp.path()),
        "the state directory [tmp]/lost held a conversation (its marker file ishiki.conversation is there), but the history store [tmp]/lost/history.sqlite has none of its tables (its write-ahead log may have been lost): refusing to start a new conversation over it; restore the history store, or choose another state directory"
    );
    // The untouched original reopens with its conversation.
    let rt = open(&dir).await.expect("the original reopens");
    assert!(rt.has_message("u1"));
}

// ---------------------------------------------------------------------------------------------
// Strict rows (SEC-4, PRJ-13).

#[tokio::test]
async fn sec4_a_stored_row_of_the_wrong_shape_is_an_error_naming_its_table_and_row() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let template = tmp.path().join("template");
    converse(&template).await;
    let first_message: String = rusqlite::Connection::open(template.join("history.sqlite"))
        .expect("the database")
        .query_row("SELECT id FROM messages ORDER BY seq LIMIT 1", [], |row| {
            row.get(0)
        })
        .expect("a message");
    let cases: Vec<(&str, String)> = vec![
        (
            "delivery state of the wrong shape",
            r#"UPDATE delivery SET json = '{"x":1}' WHERE id = (SELECT min(id) FROM delivery)"#.to_owned(),
        ),
        (
            "delivery state with an unknown field in a record",
            r#"UPDATE delivery SET json = json_set(json, '$.delivered', 1) WHERE id = (SELECT min(id) FROM delivery)"#.to_owned(),
        ),
        (
            "delivery state of another record",
            r#"UPDATE delivery SET json = json_set(json, '$.id', 'other') WHERE id = (SELECT min(id) FROM delivery)"#.to_owned(),
        ),
        (
            "catalog with an unknown field",
            r#"UPDATE state SET json = json_set(json, '$.x', 1) WHERE key = 'catalog'"#.to_owned(),
        ),
        (
            "message with an unknown field",
            format!("UPDATE messages SET json = json_set(json, '$.extra', 1) WHERE id = '{first_message}'"),
        ),
        (
            "message whose record names another id",
            format!("UPDATE messages SET json = json_set(json, '$.id', 'other') WHERE id = '{first_message}'"),
        ),
        (
            "message that is not JSON",
            format!("UPDATE messages SET json = '{{' WHERE id = '{first_message}'"),
        ),
        (
            "message stored as a blob",
            format!("UPDATE messages SET json = x'7b7d' WHERE id = '{first_message}'"),
        ),
        (
            "withdrawn flag out of range",
            format!("UPDATE messages SET withdrawn = 2 WHERE id = '{first_message}'"),
        ),
        (
            "attachment record of the wrong shape",
            r#"UPDATE attachments SET json = '{"x":1}' WHERE seq = (SELECT min(seq) FROM attachments)"#.to_owned(),
        ),
        (
            "step that is not a number",
            r#"UPDATE meta SET json = '"seven"' WHERE key = 'step'"#.to_owned(),
        ),
        (
            "pending calls of the wrong shape",
            r#"INSERT OR REPLACE INTO meta (key, json) VALUES ('pending_calls', '{"x":1}')"#.to_owned(),
        ),
    ];
    let mut report = Vec::new();
    for (i, (name, sql)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        std::fs::create_dir(&dir).expect("a case directory");
        for entry in [
            "history.sqlite",
            "history.sqlite-wal",
            "ishiki.conversation",
        ] {
            if template.join(entry).exists() {
                std::fs::copy(template.join(entry), dir.join(entry)).expect("a copy");
            }
        }
        let changed = rusqlite::Connection::open(dir.join("history.sqlite"))
            .expect("the copy")
            .execute(sql, [])
            .expect("the damage applies");
        assert_eq!(changed, 1, "{name}: {sql}");
        let error = open(&dir).await.expect_err(name);
        assert_eq!(error.kind(), RuntimeErrorKind::Damaged, "{name}: {error}");
        report.push(format!("{name}:\n  {}", error.message()));
    }
    with_snapshots(|| insta::assert_snapshot!("state_dir_damaged_rows", report.join("\n")));
    // The undamaged template still opens.
    open(&template).await.expect("the template opens");
}
