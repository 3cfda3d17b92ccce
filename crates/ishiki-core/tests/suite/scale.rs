//! What many conversations per process and long conversations rely on (issue 16): a runtime's
//! step can run in a task on a multi-threaded executor, and history can be read from a
//! position on instead of from the start.

use ishiki_core::store::{Batch, StoredMessage};
use ishiki_core::{HistoryStore, MemoryStore, Runtime, SqliteStore};
use serde_json::json;

/// Compiles only while the runtime's futures are `Send`: `tokio::spawn` on a multi-threaded
/// runtime needs it to open and step many conversations at once.
#[allow(dead_code)]
fn the_runtime_can_run_in_a_spawned_task(
    runtime: &mut Runtime,
    builder: ishiki_core::RuntimeBuilder,
    prepared: ishiki_core::Prepared,
    response: ishiki_core::ModelResponse,
    model: &dyn ishiki_core::Model,
) {
    fn send<T: Send>(_: T) {}
    send(builder.build());
    send(runtime.commit(prepared, response));
    send(runtime.execute());
    send(runtime.add_user_message("m", "text", &[]));
    send(runtime.withdraw("m"));
    send(runtime.step_with(model));
}

fn message(n: usize) -> StoredMessage {
    StoredMessage {
        id: format!("m{n}"),
        json: json!({ "n": n }),
    }
}

#[tokio::test]
async fn load_messages_since_returns_exactly_the_tail_with_withdrawn_flags() {
    let stores: Vec<Box<dyn HistoryStore>> = vec![
        Box::new(SqliteStore::in_memory().expect("sqlite")),
        Box::new(MemoryStore::new()),
    ];
    for mut store in stores {
        for n in 0..5 {
            store
                .commit(&Batch {
                    messages: vec![message(n)],
                    ..Batch::default()
                })
                .await
                .expect("commit");
        }
        store
            .commit(&Batch {
                withdrawn: vec!["m3".to_owned()],
                ..Batch::default()
            })
            .await
            .expect("withdraw");
        let all = store.load().await.expect("load").messages;
        for after in 0..=7 {
            let tail = store.load_messages_since(after).await.expect("since");
            assert_eq!(
                tail,
                all[after.min(all.len())..].to_vec(),
                "{store:?} after {after}"
            );
        }
        assert_eq!(
            store.load_messages_since(3).await.expect("since"),
            vec![(message(3), true), (message(4), false)]
        );
    }
}
