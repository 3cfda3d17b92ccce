//! Versioned migrations, refusal of a newer schema, rows that went bad, and conversations kept
//! apart in one database.

use ishiki_core::store::{Batch, StoredMessage};
use ishiki_core::{HistoryStore, StoreErrorKind};
use ishiki_postgres::{PostgresOptions, PostgresStore, SCHEMA_VERSION};
use serde_json::json;

use super::database;

async fn open(url: &str, conversation: &str) -> PostgresStore {
    PostgresStore::connect(url, conversation, &PostgresOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{conversation} opens: {e}"))
}

use super::client;

async fn versions(url: &str) -> Vec<i32> {
    client(url)
        .await
        .query("SELECT version FROM ishiki_schema ORDER BY version", &[])
        .await
        .expect("the schema table exists")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

fn one_message(id: &str) -> Batch {
    Batch {
        messages: vec![StoredMessage {
            id: id.to_owned(),
            json: json!({ "text": format!("{id} \u{0000} ✓") }),
        }],
        ..Batch::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_opens_migrate_once() {
    let Some(url) = database("concurrent_first_opens_migrate_once") else {
        return;
    };
    let openers: Vec<_> = (0..4)
        .map(|k| {
            let url = url.clone();
            tokio::spawn(async move {
                PostgresStore::connect(&url, &format!("c{k}"), &PostgresOptions::default())
                    .await
                    .map(drop)
            })
        })
        .collect();
    for opener in openers {
        opener.await.expect("no panic").expect("opens");
    }
    drop(open(&url, "again").await);
    let expected: Vec<i32> = (1..=SCHEMA_VERSION).collect();
    assert_eq!(versions(&url).await, expected);
}

/// A database of schema version 1 kept each conversation's delivery state as one document;
/// migration 2 moves each record's state to its own row, per conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_database_is_migrated_with_its_delivery_state_split_into_rows() {
    let Some(url) = database("a_version_1_database_is_migrated") else {
        return;
    };
    for conversation in ["c1", "c2"] {
        let mut store = open(&url, conversation).await;
        store.commit(&one_message("m1")).await.expect("commits");
    }
    // What version 1 was: no `ishiki_delivery`, the state a row of `ishiki_state`.
    client(&url)
        .await
        .batch_execute(
            r#"DROP TABLE ishiki_delivery;
               DELETE FROM ishiki_schema WHERE version > 1;
               INSERT INTO ishiki_state (conversation, key, json) VALUES
                 ('c1', 'delivery', '{"records":[{"id":"a1","seq":0,"viewed":true},{"id":"a2","seq":1}]}'),
                 ('c2', 'delivery', '{"records":[{"id":"a1","seq":0,"released":true}]}');"#,
        )
        .await
        .expect("back to version 1");
    let state = open(&url, "c1").await.load().await.expect("loads");
    assert_eq!(state.delivery, None);
    assert_eq!(
        state.delivery_records.into_iter().collect::<Vec<_>>(),
        [
            (
                "a1".to_owned(),
                json!({ "id": "a1", "seq": 0, "viewed": true })
            ),
            ("a2".to_owned(), json!({ "id": "a2", "seq": 1 })),
        ]
    );
    assert_eq!(state.messages.len(), 1);
    let other = open(&url, "c2").await.load().await.expect("loads");
    assert_eq!(
        other.delivery_records.into_iter().collect::<Vec<_>>(),
        [(
            "a1".to_owned(),
            json!({ "id": "a1", "seq": 0, "released": true })
        )]
    );
    let expected: Vec<i32> = (1..=SCHEMA_VERSION).collect();
    assert_eq!(versions(&url).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec3_a_newer_schema_is_refused_clearly() {
    let Some(url) = database("sec3_a_newer_schema_is_refused_clearly") else {
        return;
    };
    drop(open(&url, "c").await);
    client(&url)
        .await
        .execute("INSERT INTO ishiki_schema (version) VALUES (99)", &[])
        .await
        .expect("inserts");
    let error = PostgresStore::connect(&url, "c", &PostgresOptions::default())
        .await
        .expect_err("a newer schema");
    assert_eq!(error.kind(), StoreErrorKind::Version);
    assert_eq!(
        error.message(),
        format!(
            "history store schema version 99 is newer than this build supports ({SCHEMA_VERSION})"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec3_a_bad_stored_row_names_its_table_and_id() {
    let Some(url) = database("sec3_a_bad_stored_row_names_its_table_and_id") else {
        return;
    };
    let mut store = open(&url, "c").await;
    store.commit(&one_message("m1")).await.expect("commits");
    client(&url)
        .await
        .execute(
            "UPDATE ishiki_messages SET json = '{oops' WHERE id = 'm1'",
            &[],
        )
        .await
        .expect("updates");
    let error = store.load().await.expect_err("a corrupt row");
    assert_eq!(error.kind(), StoreErrorKind::Corrupt);
    assert!(
        error
            .message()
            .starts_with("stored row `m1` in table ishiki_messages is not valid JSON: "),
        "{error}"
    );

    client(&url)
        .await
        .execute(
            "INSERT INTO ishiki_meta (conversation, key, json) VALUES ('c', 'step', 'nope')",
            &[],
        )
        .await
        .expect("inserts");
    client(&url)
        .await
        .execute("DELETE FROM ishiki_messages", &[])
        .await
        .expect("deletes");
    let error = store.load().await.expect_err("a corrupt meta row");
    assert!(
        error
            .message()
            .starts_with("stored row `step` in table ishiki_meta is not valid JSON: "),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_in_one_database_are_apart() {
    let Some(url) = database("conversations_in_one_database_are_apart") else {
        return;
    };
    let mut a = open(&url, "a").await;
    let mut b = open(&url, "b").await;
    // The same ids in two conversations are no duplicates.
    a.commit(&one_message("m1")).await.expect("a commits");
    b.commit(&one_message("m1")).await.expect("b commits");
    b.commit(&one_message("m2")).await.expect("b commits again");
    let error = a
        .commit(&one_message("m1"))
        .await
        .expect_err("a duplicate in a");
    assert_eq!(error.kind(), StoreErrorKind::DuplicateId);
    async fn ids(s: &PostgresStore) -> Vec<String> {
        s.load()
            .await
            .expect("loads")
            .messages
            .into_iter()
            .map(|(m, _)| m.id)
            .collect()
    }
    assert_eq!(ids(&a).await, ["m1"]);
    assert_eq!(ids(&b).await, ["m1", "m2"]);
    // NUL and non-ASCII text round-trip exactly (stored as JSON text, not jsonb).
    assert_eq!(
        a.load().await.expect("loads").messages[0].0,
        one_message("m1").messages[0]
    );
}
