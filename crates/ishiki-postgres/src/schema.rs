//! The tables of the PostgreSQL history store: versioned migrations (append only, applied
//! under an advisory lock, a newer schema refused) and the statements every commit reuses.

use deadpool_postgres::Object;
use ishiki_store::{StoreError, StoreErrorKind};

use crate::{SCHEMA_VERSION, db};

/// Migration `n` (1-based) moves the schema from version `n - 1` to `n`. Append only: a
/// released migration never changes.
pub(crate) const MIGRATIONS: &[&str] = &[
    "
CREATE TABLE ishiki_leases (
    conversation TEXT PRIMARY KEY,
    token BIGINT NOT NULL,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE ishiki_messages (
    seq BIGSERIAL PRIMARY KEY,
    conversation TEXT NOT NULL,
    id TEXT NOT NULL,
    json TEXT NOT NULL,
    withdrawn BOOLEAN NOT NULL DEFAULT false,
    UNIQUE (conversation, id)
);
CREATE INDEX ishiki_messages_in_order ON ishiki_messages (conversation, seq);
CREATE TABLE ishiki_attachments (
    seq BIGSERIAL PRIMARY KEY,
    conversation TEXT NOT NULL,
    id TEXT NOT NULL,
    json TEXT NOT NULL,
    UNIQUE (conversation, id)
);
CREATE INDEX ishiki_attachments_in_order ON ishiki_attachments (conversation, seq);
CREATE TABLE ishiki_state (
    conversation TEXT NOT NULL,
    key TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (conversation, key)
);
CREATE TABLE ishiki_meta (
    conversation TEXT NOT NULL,
    key TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (conversation, key)
);
",
    "
-- Each attachment record's delivery state in its own row, so a commit writes only the records
-- whose state changed (issue 26); the documents version 1 kept are split into rows here (a
-- record listed twice keeps its first entry, as in the SQLite store's migration).
CREATE TABLE ishiki_delivery (
    conversation TEXT NOT NULL,
    id TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (conversation, id)
);
INSERT INTO ishiki_delivery (conversation, id, json)
    SELECT s.conversation, r.value ->> 'id', r.value::text
    FROM ishiki_state s, json_array_elements(s.json::json -> 'records') AS r(value)
    WHERE s.key = 'delivery'
    ON CONFLICT (conversation, id) DO NOTHING;
DELETE FROM ishiki_state WHERE key = 'delivery';
",
];

/// The advisory lock key that serializes migrations (any constant; "ishiki" in ASCII).
const MIGRATION_LOCK: i64 = 0x6973_6869_6b69;

/// The statements every commit runs, prepared once per connection (the pool's statement
/// cache keeps them).
pub(crate) mod sql {
    pub(crate) const RENEW: &str =
        "UPDATE ishiki_leases SET expires_at = now() + make_interval(secs => $3)
         WHERE conversation = $1 AND token = $2";
    pub(crate) const INSERT_MESSAGE: &str =
        "INSERT INTO ishiki_messages (conversation, id, json) VALUES ($1, $2, $3)";
    pub(crate) const WITHDRAW: &str = "UPDATE ishiki_messages SET withdrawn = true
         WHERE conversation = $1 AND id = $2";
    pub(crate) const INSERT_ATTACHMENT: &str =
        "INSERT INTO ishiki_attachments (conversation, id, json) VALUES ($1, $2, $3)";
    pub(crate) const PUT_STATE: &str =
        "INSERT INTO ishiki_state (conversation, key, json) VALUES ($1, $2, $3)
         ON CONFLICT (conversation, key) DO UPDATE SET json = excluded.json";
    pub(crate) const PUT_META: &str =
        "INSERT INTO ishiki_meta (conversation, key, json) VALUES ($1, $2, $3)
         ON CONFLICT (conversation, key) DO UPDATE SET json = excluded.json";
    pub(crate) const PUT_DELIVERY: &str =
        "INSERT INTO ishiki_delivery (conversation, id, json) VALUES ($1, $2, $3)
         ON CONFLICT (conversation, id) DO UPDATE SET json = excluded.json";
}

fn newer_schema(version: i32) -> StoreError {
    StoreError::new(
        StoreErrorKind::Version,
        format!(
            "history store schema version {version} is newer than this build supports ({SCHEMA_VERSION})"
        ),
    )
}

pub(crate) async fn migrate(client: &mut Object) -> Result<(), StoreError> {
    // The common case, without taking the migration lock: the schema is current. (An error
    // here, such as a missing table, just means the locked path below decides.)
    if let Ok(row) = client
        .query_one("SELECT max(version) FROM ishiki_schema", &[])
        .await
        && let Ok(Some(version)) = row.try_get::<_, Option<i32>>(0)
    {
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        if version > SCHEMA_VERSION {
            return Err(newer_schema(version));
        }
    }
    let tx = client
        .transaction()
        .await
        .map_err(db("cannot migrate the schema"))?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});
         CREATE TABLE IF NOT EXISTS ishiki_schema (
             version INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         );"
    ))
    .await
    .map_err(db("cannot migrate the schema"))?;
    let row = tx
        .query_one("SELECT coalesce(max(version), 0) FROM ishiki_schema", &[])
        .await
        .map_err(db("cannot read the schema version"))?;
    let version: i32 = row
        .try_get(0)
        .map_err(db("cannot read the schema version"))?;
    if version > SCHEMA_VERSION {
        return Err(newer_schema(version));
    }
    for (n, sql) in (1..)
        .zip(MIGRATIONS)
        .skip(usize::try_from(version).unwrap_or(0))
    {
        tx.batch_execute(sql)
            .await
            .map_err(db("cannot migrate the schema"))?;
        tx.execute("INSERT INTO ishiki_schema (version) VALUES ($1)", &[&n])
            .await
            .map_err(db("cannot migrate the schema"))?;
    }
    tx.commit().await.map_err(db("cannot migrate the schema"))
}
