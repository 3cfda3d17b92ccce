//! One writer per conversation: a second opener is refused or waits, and a runtime whose
//! lease was taken over (after it expired, or by force) cannot commit anything.

use std::time::Duration;

use ishiki_core::{
    HistoryStore, ModelResponse, ModelsDoc, Profile, Runtime, StoreErrorKind, WorkerSpawn, assemble,
};
use ishiki_postgres::{PostgresOptions, PostgresStore, WhenHeld};

use super::database;

fn options(when_held: WhenHeld) -> PostgresOptions {
    PostgresOptions {
        when_held,
        holder: "worker-a".to_owned(),
        ..PostgresOptions::default()
    }
}

async fn store(url: &str, conversation: &str, options: &PostgresOptions) -> PostgresStore {
    PostgresStore::connect(url, conversation, options)
        .await
        .unwrap_or_else(|e| panic!("{conversation} opens: {e}"))
}

/// A runtime (one conversation) whose history is `store`, with a state directory of its own
/// below `dir`: two runtimes of one conversation are two workers, and a state directory serves
/// one runtime at a time.
async fn runtime(dir: &std::path::Path, store: PostgresStore) -> Runtime {
    static WORKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = WORKERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = dir.join(format!("worker-{n}"));
    let profile = Profile::from_yaml("").expect("an empty profile is valid");
    let models = ModelsDoc::from_yaml("models:\n  main: { input: [text] }\n").expect("models");
    let assembly = assemble(profile, models, "main").expect("assembles");
    Runtime::builder(assembly, &dir)
        .codemode_worker(WorkerSpawn::InProcess)
        .store(Box::new(store))
        .build()
        .await
        .expect("the runtime builds")
}

fn say(text: &str) -> ModelResponse {
    ModelResponse::from_text(text)
}

/// Commits one text-only step; the error is the runtime's.
async fn step(rt: &mut Runtime, text: &str) -> Result<(), String> {
    let prepared = rt.prepare().await.map_err(|e| e.to_string())?;
    rt.commit(prepared, say(text))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

async fn assistant_texts(url: &str, conversation: &str) -> Vec<String> {
    let store = store(url, conversation, &options(WhenHeld::TakeOver)).await;
    store
        .load()
        .await
        .expect("loads")
        .messages
        .into_iter()
        .filter(|(m, _)| m.json["role"] == "assistant")
        .map(|(m, _)| {
            m.json["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_runtime_for_the_same_conversation_is_refused() {
    let Some(url) = database("a_second_runtime_for_the_same_conversation_is_refused") else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut first = runtime(
        dir.path(),
        store(&url, "c", &options(WhenHeld::Refuse)).await,
    )
    .await;
    step(&mut first, "one").await.expect("the holder commits");

    let error = PostgresStore::connect(&url, "c", &options(WhenHeld::Refuse))
        .await
        .expect_err("a second writer of `c` is refused");
    assert_eq!(error.kind(), StoreErrorKind::Lease);
    assert!(
        error
            .message()
            .starts_with("conversation `c` is held by another runtime (worker-a, lease until "),
        "{error}"
    );
    assert!(
        error
            .message()
            .ends_with("); one writer per conversation: wait for it, or once that runtime is gone take the lease over (WhenHeld::TakeOver; `ishiki chat --take-over`)"),
        "{error}"
    );
    // Waiting no time at all is refusing, with the wait said.
    let error = PostgresStore::connect(&url, "c", &options(WhenHeld::Wait(Duration::ZERO)))
        .await
        .expect_err("still held");
    assert_eq!(error.kind(), StoreErrorKind::Lease);
    assert!(error.message().ends_with("after waiting 0 s"), "{error}");

    // Other conversations are not held: the lease is per conversation.
    let other_dir = tempfile::tempdir().expect("a temp dir");
    let mut other = runtime(
        other_dir.path(),
        store(&url, "d", &options(WhenHeld::Refuse)).await,
    )
    .await;
    step(&mut other, "elsewhere")
        .await
        .expect("another conversation commits");

    // The holder was not disturbed by the refused opener.
    step(&mut first, "two")
        .await
        .expect("the holder still commits");
    drop(first);
    drop(other);
    assert_eq!(assistant_texts(&url, "c").await, ["one", "two"]);
    assert_eq!(assistant_texts(&url, "d").await, ["elsewhere"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_opener_gets_the_conversation_once_the_holder_closes() {
    let Some(url) = database("a_waiting_opener_gets_the_conversation_once_the_holder_closes")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut first = runtime(
        dir.path(),
        store(&url, "c", &options(WhenHeld::Refuse)).await,
    )
    .await;
    step(&mut first, "one").await.expect("the holder commits");
    let first_token = {
        // The holder's token, read from the lease table.
        let row = super::client(&url)
            .await
            .query_one(
                "SELECT token FROM ishiki_leases WHERE conversation = 'c'",
                &[],
            )
            .await
            .expect("a lease row");
        row.get::<_, i64>(0)
    };
    let waiter = tokio::spawn({
        let url = url.clone();
        async move {
            PostgresStore::connect(
                &url,
                "c",
                &options(WhenHeld::Wait(Duration::from_secs(120))),
            )
            .await
        }
    });
    // Closing the holder releases the lease; the waiter then gets it (or got it right away if
    // it only started now). Either way it holds a newer token.
    drop(first);
    let second = waiter.await.expect("no panic").expect("the waiter opens");
    assert!(second.lease_token() > first_token);
    let mut second = runtime(dir.path(), second).await;
    step(&mut second, "two")
        .await
        .expect("the new holder commits");
    drop(second);
    assert_eq!(assistant_texts(&url, "c").await, ["one", "two"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_whose_expired_lease_was_taken_over_cannot_commit() {
    let Some(url) = database("a_runtime_whose_expired_lease_was_taken_over_cannot_commit") else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    // A lease that expires at once: as if this worker had stalled past its lease.
    let expiring = PostgresOptions {
        lease: Duration::ZERO,
        ..options(WhenHeld::Refuse)
    };
    let mut stale = runtime(dir.path(), store(&url, "c", &expiring).await).await;
    // Nobody took it over yet: the token is still current, so the commit goes through.
    step(&mut stale, "before")
        .await
        .expect("an expired but untaken lease still commits");

    // Expired, so a second opener gets it without waiting or forcing.
    let fresh_store = store(&url, "c", &options(WhenHeld::Refuse)).await;
    let token = fresh_store.lease_token();
    let mut fresh = runtime(dir.path(), fresh_store).await;

    let error = step(&mut stale, "after")
        .await
        .expect_err("the stale runtime cannot commit");
    assert_eq!(
        error,
        format!(
            "cannot store the response: the lease on conversation `c` was taken over by another runtime (token {} is no longer current); nothing was committed",
            token - 1
        )
    );
    step(&mut fresh, "new holder")
        .await
        .expect("the new holder commits");
    // And the stale one stays fenced off.
    assert!(step(&mut stale, "again").await.is_err());
    drop(stale);
    drop(fresh);
    assert_eq!(assistant_texts(&url, "c").await, ["before", "new holder"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_of_a_runtime_that_lost_its_lease_are_not_committed() {
    let Some(url) = database("tool_results_of_a_runtime_that_lost_its_lease_are_not_committed")
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let expiring = PostgresOptions {
        lease: Duration::ZERO,
        ..options(WhenHeld::Refuse)
    };
    let mut stale = runtime(dir.path(), store(&url, "c", &expiring).await).await;
    stale
        .workspace()
        .write("/home/workspace/note.txt", b"hello")
        .expect("a fixture");
    let prepared = stale.prepare().await.expect("a request");
    let response = ModelResponse::from_calls(vec![ishiki_core::ToolCall {
        id: "r1".to_owned(),
        name: "read".to_owned(),
        input: serde_json::json!({ "url": "workspace:///home/workspace/note.txt" }),
    }]);
    stale
        .commit(prepared, response)
        .await
        .expect("the response commits");

    // Taken over while the call runs: its result must not land in the new holder's history.
    let fresh = store(&url, "c", &options(WhenHeld::Refuse)).await;
    let error = stale
        .execute()
        .await
        .expect_err("the stale runtime cannot commit the result");
    assert!(
        error.message().starts_with(
            "cannot store the tool results: the lease on conversation `c` was taken over"
        ),
        "{error}"
    );
    drop(stale);
    // The new holder sees the call without a result and answers it as interrupted.
    let mut fresh = runtime(dir.path(), fresh).await;
    let request = fresh.prepare().await.expect("a request").request;
    let last = request.messages.last().expect("a message");
    assert_eq!(last.id, "s1-tools");
    assert!(
        matches!(
            last.content.as_slice(),
            [ishiki_core::Part::ToolResult { call_id, is_error: true, .. }] if call_id == "r1"
        ),
        "{last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_lease_taken_over_by_force_fences_the_old_holder() {
    let Some(url) = database("a_live_lease_taken_over_by_force_fences_the_old_holder") else {
        return;
    };
    let mut old = store(&url, "c", &options(WhenHeld::Refuse)).await;
    let new = store(&url, "c", &options(WhenHeld::TakeOver)).await;
    assert_eq!(new.lease_token(), old.lease_token() + 1);
    let error = old
        .commit(&ishiki_core::store::Batch {
            meta: vec![("k".to_owned(), serde_json::json!(1))],
            ..ishiki_core::store::Batch::default()
        })
        .await
        .expect_err("fenced");
    assert_eq!(error.kind(), StoreErrorKind::Lease);
    // Dropping the old holder does not release the new holder's lease.
    drop(old);
    let error = PostgresStore::connect(&url, "c", &options(WhenHeld::Refuse))
        .await
        .expect_err("the new holder still holds it");
    assert_eq!(error.kind(), StoreErrorKind::Lease);
    assert!(new.load().await.expect("loads").meta.is_empty());
}

/// Issue 24: after a crash mid-step the dead process's lease blocked the conversation for its
/// whole time to live. A holder on this host whose process is gone is taken over at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_whose_holder_process_is_gone_is_taken_over_at_once() {
    let Some(url) = database("a_lease_whose_holder_process_is_gone_is_taken_over_at_once") else {
        return;
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .expect("a host name");
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("a child process");
    let dead = child.id();
    child.wait().expect("it ends");
    let crashed = PostgresOptions {
        holder: format!("process {dead} on {host}"),
        ..PostgresOptions::default()
    };
    // A store that is never dropped keeps its lease, as a killed process does.
    std::mem::forget(store(&url, "crashed", &crashed).await);
    let started = std::time::Instant::now();
    let taken = PostgresStore::connect(&url, "crashed", &PostgresOptions::default())
        .await
        .expect("the dead holder's lease is taken over");
    assert!(taken.lease_token() > 0);
    assert!(started.elapsed() < Duration::from_secs(10), "at once");

    // A live holder is still refused, and the message says how to take over.
    let _live = store(&url, "alive", &options(WhenHeld::Refuse)).await;
    let error = PostgresStore::connect(&url, "alive", &PostgresOptions::default())
        .await
        .expect_err("a live holder keeps its lease");
    assert_eq!(error.kind(), StoreErrorKind::Lease);
    assert!(
        error.message().contains("`ishiki chat --take-over`"),
        "{error}"
    );
}
