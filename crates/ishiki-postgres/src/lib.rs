//! `ishiki-postgres`: the Ishiki [`HistoryStore`] on PostgreSQL, for many conversations on
//! several machines (any worker may take the next step of any conversation).
//!
//! - **Keyed by conversation id.** Every table carries the conversation; one database holds
//!   any number of conversations.
//! - **The same transactions as the SQLite store.** One [`Batch`] is one PostgreSQL
//!   transaction: a response and its delivery-state change, or tool results and their
//!   attachment records, or catalog deltas, all or nothing.
//! - **One writer per conversation.** [`PostgresStore::connect`] takes a lease: a row in
//!   `ishiki_leases` with an expiry and a fencing token. Every commit first renews the lease
//!   *for its own token* inside the commit's transaction (the row lock orders it against a
//!   takeover), so a runtime whose lease was taken over cannot commit anything. A second opener
//!   is refused while the lease is live, waits for it ([`WhenHeld::Wait`]), or takes it over
//!   ([`WhenHeld::TakeOver`], for a supervisor that knows the holder is gone). A clean drop
//!   releases the lease at once; a crashed holder's lease runs out after its time to live.
//! - **Versioned migrations.** The crate creates and migrates its tables (`ishiki_schema`
//!   records each applied version, under an advisory lock so concurrent openers do not race)
//!   and refuses a database migrated by a newer build with a clear error.
//!
//! Values are stored as JSON text, not `jsonb`: text keeps exactly what was committed, and
//! `jsonb` rejects the escaped NUL character (`\u0000`) that model output may contain.
//!
//! Connection strings are libpq's (`postgres://user:pass@host:port/db` or
//! `host=/run/postgresql dbname=ishiki`); what they leave out is read from the usual `PG*`
//! environment variables ([`config_from`]). The connection is plain TCP or a Unix socket,
//! without TLS.
//!
//! ```no_run
//! # fn demo(assembly: ishiki_core::Assembly) -> Result<(), Box<dyn std::error::Error>> {
//! use ishiki_postgres::{PostgresOptions, PostgresStore};
//! // The password comes from PGPASSWORD, say.
//! let store = PostgresStore::connect(
//!     "postgres://ishiki@db.internal/ishiki",
//!     "conversation-42",
//!     &PostgresOptions::default(),
//! )?;
//! let runtime = ishiki_core::Runtime::builder(assembly, "/var/lib/ishiki/conversation-42")
//!     .store(Box::new(store))
//!     .build()?;
//! # drop(runtime);
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ishiki_store::{
    Batch, HistoryStore, StoreError, StoreErrorKind, StoredAttachment, StoredMessage, StoredState,
};
use postgres::error::SqlState;
use postgres::types::FromSql;
use postgres::{Client, Config, IsolationLevel, NoTls, Row};
use serde_json::Value;

mod config;
mod lease;
mod schema;
#[cfg(feature = "test-cluster")]
pub mod testing;

use config::check_conversation;
pub use config::{config_from, socket_dirs};
use lease::{acquire, default_holder};
use schema::{MIGRATIONS, Statements, migrate, prepare};

/// The schema version this build writes: the number of its migrations.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The longest conversation id accepted, in bytes.
pub const MAX_CONVERSATION_BYTES: usize = 256;

/// What a second opener does while another runtime holds the conversation's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WhenHeld {
    /// Fail at once with a [`StoreErrorKind::Lease`] error naming the holder.
    #[default]
    Refuse,
    /// Try again until the lease is released or expires, for at most this long, then fail.
    Wait(Duration),
    /// Take the lease now: the holder's token becomes stale and its next commit fails. For a
    /// supervisor that knows the holder is gone (its process was killed), not for guessing.
    TakeOver,
}

/// How [`PostgresStore::connect`] connects and leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// How long a lease lives without a commit (every commit renews it, and committing an
    /// empty batch is a heartbeat); default 120 s, longer than a slow model answer or tool
    /// call. A holder that stops committing for longer may be taken over, and then commits
    /// nothing more.
    pub lease: Duration,
    /// What to do while another runtime holds the lease.
    pub when_held: WhenHeld,
    /// Who holds the lease, for the error another opener sees (default: this process id and
    /// host name).
    pub holder: String,
    /// The connection timeout, unless the connection string sets one (default 10 s).
    pub connect_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(120),
            when_held: WhenHeld::Refuse,
            holder: default_holder(),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A [`HistoryStore`] for one conversation in a PostgreSQL database, holding that
/// conversation's lease while it lives.
pub struct PostgresStore {
    /// `None` only while dropping (the client must be dropped off the caller's thread too).
    inner: Mutex<Option<Inner>>,
    conversation: String,
    token: i64,
    lease_secs: f64,
}

struct Inner {
    client: Client,
    statements: Statements,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("conversation", &self.conversation)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// Runs `f` on a fresh thread. The blocking client drives its own small tokio runtime, which
/// must not start on a thread that is already running one (the caller may be a task).
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(f)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

fn db(context: &'static str) -> impl Fn(postgres::Error) -> StoreError {
    move |e| {
        let detail = match e.as_db_error() {
            Some(db) => db.message().to_owned(),
            None => e.to_string(),
        };
        StoreError::new(
            StoreErrorKind::Database,
            format!("history store (postgres): {context}: {detail}"),
        )
    }
}

fn is_unique_violation(e: &postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

impl PostgresStore {
    /// Connects to the database `url` names (see [`config_from`]), creates or migrates the
    /// schema, and takes the lease of `conversation`.
    pub fn connect(
        url: &str,
        conversation: &str,
        options: &PostgresOptions,
    ) -> Result<Self, StoreError> {
        let mut config = config_from(url, &|name| std::env::var(name).ok())?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        Self::connect_with(&config, conversation, options)
    }

    /// [`connect`](Self::connect) with a ready [`Config`].
    pub fn connect_with(
        config: &Config,
        conversation: &str,
        options: &PostgresOptions,
    ) -> Result<Self, StoreError> {
        check_conversation(conversation)?;
        let lease_secs = options.lease.as_secs_f64();
        off_runtime(|| {
            let mut client = config
                .connect(NoTls)
                .map_err(db("cannot connect to the database"))?;
            migrate(&mut client)?;
            let statements = prepare(&mut client)?;
            let token = acquire(&mut client, conversation, options, lease_secs)?;
            Ok(Self {
                inner: Mutex::new(Some(Inner { client, statements })),
                conversation: conversation.to_owned(),
                token,
                lease_secs,
            })
        })
    }

    /// The conversation this store holds.
    pub fn conversation(&self) -> &str {
        &self.conversation
    }

    /// This store's fencing token: it increases with every new holder of the conversation.
    pub fn lease_token(&self) -> i64 {
        self.token
    }

    fn with_inner<T>(
        &self,
        f: impl FnOnce(&mut Inner) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // A panic while holding the lock leaves at most an open transaction, which the
        // client rolls back when its value drops; the connection stays usable.
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match guard.as_mut() {
            Some(inner) => f(inner),
            None => Err(StoreError::new(
                StoreErrorKind::Database,
                "history store (postgres): the connection is closed",
            )),
        }
    }

    fn lost_lease(&self) -> StoreError {
        StoreError::new(
            StoreErrorKind::Lease,
            format!(
                "the lease on conversation `{}` was taken over by another runtime (token {} is no longer current); nothing was committed",
                self.conversation, self.token
            ),
        )
    }
}

fn column<'a, T: FromSql<'a>>(
    row: &'a Row,
    index: usize,
    table: &str,
    key: &str,
) -> Result<T, StoreError> {
    row.try_get(index).map_err(|e| {
        StoreError::new(
            StoreErrorKind::Corrupt,
            format!("stored row `{key}` in table {table} is unreadable: {e}"),
        )
    })
}

fn parse_json(table: &str, key: &str, text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| {
        StoreError::new(
            StoreErrorKind::Corrupt,
            format!("stored row `{key}` in table {table} is not valid JSON: {e}"),
        )
    })
}

impl HistoryStore for PostgresStore {
    fn load(&self) -> Result<StoredState, StoreError> {
        let conversation = self.conversation.as_str();
        self.with_inner(|inner| {
            off_runtime(|| {
                let fail = db("cannot load the history");
                // One snapshot for all tables.
                let mut tx = inner
                    .client
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()
                    .map_err(&fail)?;
                let mut state = StoredState::default();
                let rows = tx
                    .query(
                        "SELECT id, json, withdrawn FROM ishiki_messages
                         WHERE conversation = $1 ORDER BY seq",
                        &[&conversation],
                    )
                    .map_err(&fail)?;
                for row in &rows {
                    let id: String = column(row, 0, "ishiki_messages", "?")?;
                    let json: String = column(row, 1, "ishiki_messages", &id)?;
                    let withdrawn: bool = column(row, 2, "ishiki_messages", &id)?;
                    let json = parse_json("ishiki_messages", &id, &json)?;
                    state.messages.push((StoredMessage { id, json }, withdrawn));
                }
                let rows = tx
                    .query(
                        "SELECT id, json FROM ishiki_attachments
                         WHERE conversation = $1 ORDER BY seq",
                        &[&conversation],
                    )
                    .map_err(&fail)?;
                for row in &rows {
                    let id: String = column(row, 0, "ishiki_attachments", "?")?;
                    let json: String = column(row, 1, "ishiki_attachments", &id)?;
                    let json = parse_json("ishiki_attachments", &id, &json)?;
                    state.attachments.push(StoredAttachment { id, json });
                }
                // The keyed tables: `(key, json)` rows of this conversation.
                let mut keyed = |table: &str, key: &str| -> Result<Vec<_>, StoreError> {
                    let sql = format!("SELECT {key}, json FROM {table} WHERE conversation = $1");
                    let rows = tx.query(&sql, &[&conversation]).map_err(&fail)?;
                    let mut out = Vec::with_capacity(rows.len());
                    for row in &rows {
                        let name: String = column(row, 0, table, "?")?;
                        let json: String = column(row, 1, table, &name)?;
                        let value = parse_json(table, &name, &json)?;
                        out.push((name, value));
                    }
                    Ok(out)
                };
                for (key, value) in keyed("ishiki_state", "key")? {
                    match key.as_str() {
                        "delivery" => state.delivery = Some(value),
                        "catalog" => state.catalog = Some(value),
                        _ => {} // a key a newer build writes; this build does not read it
                    }
                }
                state.meta = keyed("ishiki_meta", "key")?.into_iter().collect();
                state.delivery_records = keyed("ishiki_delivery", "id")?.into_iter().collect();
                tx.commit().map_err(&fail)?;
                Ok(state)
            })
        })
    }

    fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        batch.check_ids()?;
        let conversation = self.conversation.as_str();
        let token = self.token;
        let lease_secs = self.lease_secs;
        let lost = self.lost_lease();
        self.with_inner(|inner| {
            off_runtime(|| {
                let fail = db("cannot commit");
                let st = &inner.statements;
                // Dropping `tx` on any early return rolls the whole batch back.
                let mut tx = inner.client.transaction().map_err(&fail)?;
                // The fence: renew our own lease or commit nothing. The row stays locked until
                // the end of this transaction, so a takeover waits for it or wins before it.
                let renewed = tx
                    .execute(&st.renew, &[&conversation, &token, &lease_secs])
                    .map_err(&fail)?;
                if renewed == 0 {
                    return Err(lost);
                }
                for message in &batch.messages {
                    tx.execute(
                        &st.insert_message,
                        &[&conversation, &message.id, &message.json.to_string()],
                    )
                    .map_err(|e| {
                        if is_unique_violation(&e) {
                            StoreError::duplicate_id("message", &message.id, "is already stored")
                        } else {
                            fail(e)
                        }
                    })?;
                }
                for id in &batch.withdrawn {
                    if tx
                        .execute(&st.withdraw, &[&conversation, id])
                        .map_err(&fail)?
                        == 0
                    {
                        return Err(StoreError::unknown_message(id));
                    }
                }
                for attachment in &batch.attachments {
                    tx.execute(
                        &st.insert_attachment,
                        &[&conversation, &attachment.id, &attachment.json.to_string()],
                    )
                    .map_err(|e| {
                        if is_unique_violation(&e) {
                            StoreError::duplicate_id(
                                "attachment",
                                &attachment.id,
                                "is already stored",
                            )
                        } else {
                            fail(e)
                        }
                    })?;
                }
                if let Some(delivery) = &batch.delivery {
                    tx.execute(
                        &st.put_state,
                        &[&conversation, &"delivery", &delivery.to_string()],
                    )
                    .map_err(&fail)?;
                }
                if let Some(catalog) = &batch.catalog {
                    tx.execute(
                        &st.put_state,
                        &[&conversation, &"catalog", &catalog.to_string()],
                    )
                    .map_err(&fail)?;
                }
                for (key, value) in &batch.meta {
                    tx.execute(&st.put_meta, &[&conversation, key, &value.to_string()])
                        .map_err(&fail)?;
                }
                for (id, value) in &batch.delivery_records {
                    tx.execute(&st.put_delivery, &[&conversation, id, &value.to_string()])
                        .map_err(&fail)?;
                }
                tx.commit().map_err(&fail)
            })
        })
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Release the lease at once so the next opener need not wait for it to expire; the
        // token stays, so tokens only grow. Errors are moot: the lease then simply expires.
        // The blocking client also blocks when it closes: drop it off this thread too.
        let conversation = self.conversation.as_str();
        let token = self.token;
        let inner = self
            .inner
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut inner) = inner {
            off_runtime(move || {
                let _ = inner.client.execute(
                    "UPDATE ishiki_leases SET expires_at = '-infinity'
                     WHERE conversation = $1 AND token = $2",
                    &[&conversation, &token],
                );
                drop(inner);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn the_url_wins_over_the_environment() {
        let env = env_of(&[("PGUSER", "env-user"), ("PGHOST", "env-host")]);
        let config = config_from("postgres://alice:secret@db.example:6543/history", &env)
            .expect("a valid url");
        assert_eq!(config.get_user(), Some("alice"));
        assert_eq!(config.get_password(), Some(&b"secret"[..]));
        assert_eq!(config.get_dbname(), Some("history"));
        assert_eq!(config.get_ports(), &[6543]);
        assert_eq!(
            config.get_hosts(),
            &[postgres::config::Host::Tcp("db.example".to_owned())]
        );
    }

    #[test]
    fn what_the_url_leaves_out_comes_from_pg_variables() {
        let env = env_of(&[
            ("PGHOST", "/run/postgresql"),
            ("PGPORT", "5433"),
            ("PGUSER", "bob"),
            ("PGPASSWORD", "hunter2"),
            ("PGDATABASE", "ishiki"),
        ]);
        let config = config_from("postgres://", &env).expect("a valid url");
        assert_eq!(config.get_user(), Some("bob"));
        assert_eq!(config.get_password(), Some(&b"hunter2"[..]));
        assert_eq!(config.get_dbname(), Some("ishiki"));
        assert_eq!(config.get_ports(), &[5433]);
        assert_eq!(
            config.get_hosts(),
            &[postgres::config::Host::Unix("/run/postgresql".into())]
        );
        assert_eq!(config.get_application_name(), Some("ishiki"));
    }

    #[test]
    fn bad_connection_settings_are_named() {
        let env = env_of(&[("PGPORT", "many"), ("PGUSER", "u")]);
        let error = config_from("dbname=d", &env).expect_err("a bad port");
        assert_eq!(error.message(), "PGPORT `many` is not a port number");
        let error = config_from("postgres://h/d", &env_of(&[])).expect_err("no user");
        assert!(error.message().contains("names no user"), "{error}");
        let error = config_from("nonsense=1", &env_of(&[])).expect_err("a bad string");
        assert!(
            error
                .message()
                .starts_with("invalid postgres connection string"),
            "{error}"
        );
    }

    #[test]
    fn conversation_ids_are_bounded() {
        assert!(check_conversation("c-1").is_ok());
        for (id, why) in [
            (String::new(), "is empty"),
            ("x".repeat(257), "is longer than 256 bytes"),
            ("a\0b".to_owned(), "contains a NUL character"),
        ] {
            let error = check_conversation(&id).expect_err("refused");
            assert_eq!(error.message(), format!("the conversation id {why}"));
        }
    }
}
