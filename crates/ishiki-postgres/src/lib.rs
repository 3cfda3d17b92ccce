//! `ishiki-postgres`: the Ishiki [`HistoryStore`] on PostgreSQL, for many conversations on
//! several machines (any worker may take the next step of any conversation).
//!
//! - **Keyed by conversation id.** Every table carries the conversation; one database holds
//!   any number of conversations, and one [`PostgresPool`] serves any number of them from a
//!   few connections.
//! - **Async, on the caller's runtime.** The client is `tokio-postgres`: a commit awaits its
//!   round trips and holds no thread while it waits. The connections' tasks run on the tokio
//!   runtime that opened the pool (it needs its IO and time drivers, `enable_all`), so that
//!   runtime must outlive the stores.
//! - **The same transactions as the SQLite store.** One [`Batch`] is one PostgreSQL
//!   transaction: a response and its delivery-state change, or tool results and their
//!   attachment records, or catalog deltas, all or nothing. A commit whose future is dropped
//!   part-way is rolled back (the client sends `ROLLBACK` when its transaction is dropped, ahead
//!   of anything the connection does next); one dropped after its `COMMIT` was sent may have
//!   landed, and a `COMMIT` whose connection broke before the reply is reported as
//!   [`StoreErrorKind::InDoubt`]: reload to know.
//! - **One writer per conversation.** [`PostgresPool::open`] takes a lease: a row in
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
//! # async fn demo(assembly: ishiki_core::Assembly) -> Result<(), Box<dyn std::error::Error>> {
//! use ishiki_postgres::{PoolOptions, PostgresOptions, PostgresPool};
//! // One pool per process; the password comes from PGPASSWORD, say.
//! let pool = PostgresPool::connect("postgres://ishiki@db.internal/ishiki", &PoolOptions::default())
//!     .await?;
//! let store = pool.open("conversation-42", &PostgresOptions::default()).await?;
//! let runtime = ishiki_core::Runtime::builder(assembly, "/var/lib/ishiki/conversation-42")
//!     .store(Box::new(store))
//!     .build()
//!     .await?;
//! # drop(runtime);
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use ishiki_store::{
    Batch, HistoryStore, StoreError, StoreErrorKind, StoredAttachment, StoredMessage, StoredState,
};
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::FromSql;
use tokio_postgres::{Config, IsolationLevel, NoTls, Row};

mod config;
mod lease;
mod schema;
#[cfg(feature = "test-cluster")]
pub mod testing;

use config::check_conversation;
pub use config::{config_from, socket_dirs};
use lease::{acquire, default_holder, release};
use schema::{MIGRATIONS, migrate, sql};

/// The schema version this build writes: the number of its migrations.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// The longest conversation id accepted, in bytes.
pub const MAX_CONVERSATION_BYTES: usize = 256;

/// The longest a dropped store waits for its lease to be released (then the lease simply
/// expires after its time to live).
pub const RELEASE_LIMIT: Duration = Duration::from_secs(5);

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

/// How [`PostgresPool::open`] leases a conversation.
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
    /// The connection timeout of [`PostgresStore::connect`]'s own pool, unless the connection
    /// string sets one (default 10 s).
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

/// How [`PostgresPool::connect`] connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolOptions {
    /// The most connections the pool opens (default 16). A store holds one only while a
    /// load or commit runs, so many conversations share a few connections.
    pub max_connections: usize,
    /// The connection timeout, unless the connection string sets one (default 10 s); also how
    /// long a load or commit waits for a free connection before failing.
    pub connect_timeout: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Connections to one database, shared by the conversations opened from it (cheap to clone).
#[derive(Clone)]
pub struct PostgresPool {
    pool: Pool,
    /// For the lease release of a dropped store, which cannot use the pool (see [`Drop`]).
    config: Arc<Config>,
}

impl fmt::Debug for PostgresPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PostgresPool")
            .field("max_connections", &status.max_size)
            .field("open", &status.size)
            .finish_non_exhaustive()
    }
}

/// A [`HistoryStore`] for one conversation in a PostgreSQL database, holding that
/// conversation's lease while it lives.
pub struct PostgresStore {
    pool: PostgresPool,
    conversation: String,
    token: i64,
    lease_secs: f64,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("conversation", &self.conversation)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

fn db(context: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
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

fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// The `COMMIT` of a batch failed. An error the server sent (it has a SQLSTATE: a
/// serialization failure, a deferred constraint) means the transaction was rolled back; one
/// without (the connection broke, the reply never came) leaves the outcome unknown.
fn commit_failed(e: tokio_postgres::Error) -> StoreError {
    if e.code().is_some() {
        return db("cannot commit")(e);
    }
    StoreError::new(
        StoreErrorKind::InDoubt,
        format!(
            "history store (postgres): the connection failed while committing ({e}); the batch may or may not be stored: reopen the conversation from the store to know"
        ),
    )
}

fn with_timeout(config: &mut Config, timeout: Duration) {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(timeout);
    }
}

impl PostgresPool {
    /// Connects to the database `url` names (see [`config_from`]) and creates or migrates the
    /// schema. Call it inside the tokio runtime the stores will run on.
    pub async fn connect(url: &str, options: &PoolOptions) -> Result<Self, StoreError> {
        let config = config_from(url, &|name| std::env::var(name).ok())?;
        Self::connect_with(config, options).await
    }

    /// [`connect`](Self::connect) with a ready [`Config`].
    pub async fn connect_with(
        mut config: Config,
        options: &PoolOptions,
    ) -> Result<Self, StoreError> {
        with_timeout(&mut config, options.connect_timeout);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                // A connection comes back only through the client, which queues the
                // `ROLLBACK` of any transaction dropped on it; a closed one is replaced.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let timeout = Some(options.connect_timeout);
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(timeout)
            .create_timeout(timeout)
            .build()
            .map_err(|e| {
                StoreError::new(
                    StoreErrorKind::Database,
                    format!("history store (postgres): cannot build the connection pool: {e}"),
                )
            })?;
        let pool = Self {
            pool,
            config: Arc::new(config),
        };
        let mut client = pool.client("cannot connect to the database").await?;
        migrate(&mut client).await?;
        Ok(pool)
    }

    /// Takes the lease of `conversation` and returns its store.
    pub async fn open(
        &self,
        conversation: &str,
        options: &PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        check_conversation(conversation)?;
        let lease_secs = options.lease.as_secs_f64();
        // This process's own release of the lease first (a store of it just dropped).
        lease::pending(conversation).await;
        let mut client = self.client("cannot take the lease").await?;
        let token = acquire(&mut client, conversation, options, lease_secs).await?;
        Ok(PostgresStore {
            pool: self.clone(),
            conversation: conversation.to_owned(),
            token,
            lease_secs,
        })
    }

    async fn client(&self, context: &str) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|e| {
            StoreError::new(
                StoreErrorKind::Database,
                format!("history store (postgres): {context}: {e}"),
            )
        })
    }
}

impl PostgresStore {
    /// Connects a pool of its own (two connections) to the database `url` names (see
    /// [`config_from`]), creates or migrates the schema, and takes the lease of
    /// `conversation`. A process with many conversations shares one [`PostgresPool`].
    pub async fn connect(
        url: &str,
        conversation: &str,
        options: &PostgresOptions,
    ) -> Result<Self, StoreError> {
        let config = config_from(url, &|name| std::env::var(name).ok())?;
        Self::connect_with(config, conversation, options).await
    }

    /// [`connect`](Self::connect) with a ready [`Config`].
    pub async fn connect_with(
        config: Config,
        conversation: &str,
        options: &PostgresOptions,
    ) -> Result<Self, StoreError> {
        check_conversation(conversation)?;
        let pool = PostgresPool::connect_with(
            config,
            &PoolOptions {
                max_connections: 2,
                connect_timeout: options.connect_timeout,
            },
        )
        .await?;
        pool.open(conversation, options).await
    }

    /// The conversation this store holds.
    pub fn conversation(&self) -> &str {
        &self.conversation
    }

    /// This store's fencing token: it increases with every new holder of the conversation.
    pub fn lease_token(&self) -> i64 {
        self.token
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

/// `(id, json, withdrawn)` rows of `ishiki_messages`, decoded.
fn messages(rows: &[Row]) -> Result<Vec<(StoredMessage, bool)>, StoreError> {
    let mut messages = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = column(row, 0, "ishiki_messages", "?")?;
        let json: String = column(row, 1, "ishiki_messages", &id)?;
        let withdrawn: bool = column(row, 2, "ishiki_messages", &id)?;
        let json = parse_json("ishiki_messages", &id, &json)?;
        messages.push((StoredMessage { id, json }, withdrawn));
    }
    Ok(messages)
}

/// The `(key, json)` rows of one conversation in a keyed table.
async fn keyed(
    tx: &deadpool_postgres::Transaction<'_>,
    table: &str,
    key: &str,
    conversation: &str,
) -> Result<Vec<(String, Value)>, StoreError> {
    let sql = format!("SELECT {key}, json FROM {table} WHERE conversation = $1");
    let rows = tx
        .query(&sql, &[&conversation])
        .await
        .map_err(db("cannot load the history"))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String = column(row, 0, table, "?")?;
        let json: String = column(row, 1, table, &name)?;
        let value = parse_json(table, &name, &json)?;
        out.push((name, value));
    }
    Ok(out)
}

/// Maps a failed insert: a unique violation is the id already stored.
fn insert_failed<'a>(
    what: &'static str,
    id: &'a str,
) -> impl Fn(tokio_postgres::Error) -> StoreError + 'a {
    move |e| {
        if is_unique_violation(&e) {
            StoreError::duplicate_id(what, id, "is already stored")
        } else {
            db("cannot commit")(e)
        }
    }
}

#[async_trait::async_trait]
impl HistoryStore for PostgresStore {
    async fn load(&self) -> Result<StoredState, StoreError> {
        let conversation = self.conversation.as_str();
        let fail = db("cannot load the history");
        let mut client = self.pool.client("cannot load the history").await?;
        // One snapshot for all tables.
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(&fail)?;
        let mut state = StoredState::default();
        let rows = tx
            .query(
                "SELECT id, json, withdrawn FROM ishiki_messages
                 WHERE conversation = $1 ORDER BY seq",
                &[&conversation],
            )
            .await
            .map_err(&fail)?;
        state.messages = messages(&rows)?;
        let rows = tx
            .query(
                "SELECT id, json FROM ishiki_attachments
                 WHERE conversation = $1 ORDER BY seq",
                &[&conversation],
            )
            .await
            .map_err(&fail)?;
        for row in &rows {
            let id: String = column(row, 0, "ishiki_attachments", "?")?;
            let json: String = column(row, 1, "ishiki_attachments", &id)?;
            let json = parse_json("ishiki_attachments", &id, &json)?;
            state.attachments.push(StoredAttachment { id, json });
        }
        for (key, value) in keyed(&tx, "ishiki_state", "key", conversation).await? {
            match key.as_str() {
                "delivery" => state.delivery = Some(value),
                "catalog" => state.catalog = Some(value),
                _ => {} // a key a newer build writes; this build does not read it
            }
        }
        state.meta = keyed(&tx, "ishiki_meta", "key", conversation)
            .await?
            .into_iter()
            .collect();
        state.delivery_records = keyed(&tx, "ishiki_delivery", "id", conversation)
            .await?
            .into_iter()
            .collect();
        tx.commit().await.map_err(&fail)?;
        Ok(state)
    }

    async fn load_messages_since(
        &self,
        after: usize,
    ) -> Result<Vec<(StoredMessage, bool)>, StoreError> {
        let fail = db("cannot load the history");
        let client = self.pool.client("cannot load the history").await?;
        let offset = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = client
            .query(
                "SELECT id, json, withdrawn FROM ishiki_messages
                 WHERE conversation = $1 ORDER BY seq OFFSET $2",
                &[&self.conversation, &offset],
            )
            .await
            .map_err(&fail)?;
        messages(&rows)
    }

    async fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        batch.check_ids()?;
        let conversation = self.conversation.as_str();
        let token = self.token;
        let lease_secs = self.lease_secs;
        let fail = db("cannot commit");
        let mut client = self.pool.client("cannot commit").await?;
        // Dropping `tx` on any early return, or dropping this future at any await, rolls the
        // whole batch back: the client queues a `ROLLBACK` ahead of the connection's next use.
        let tx = client.transaction().await.map_err(&fail)?;
        // The fence: renew our own lease or commit nothing. The row stays locked until the end
        // of this transaction, so a takeover waits for it or wins before it.
        let renew = tx.prepare_cached(sql::RENEW).await.map_err(&fail)?;
        let renewed = tx
            .execute(&renew, &[&conversation, &token, &lease_secs])
            .await
            .map_err(&fail)?;
        if renewed == 0 {
            return Err(self.lost_lease());
        }
        if !batch.messages.is_empty() {
            let insert = tx
                .prepare_cached(sql::INSERT_MESSAGE)
                .await
                .map_err(&fail)?;
            for message in &batch.messages {
                tx.execute(
                    &insert,
                    &[&conversation, &message.id, &message.json.to_string()],
                )
                .await
                .map_err(insert_failed("message", &message.id))?;
            }
        }
        if !batch.withdrawn.is_empty() {
            let withdraw = tx.prepare_cached(sql::WITHDRAW).await.map_err(&fail)?;
            for id in &batch.withdrawn {
                if tx
                    .execute(&withdraw, &[&conversation, id])
                    .await
                    .map_err(&fail)?
                    == 0
                {
                    return Err(StoreError::unknown_message(id));
                }
            }
        }
        if !batch.attachments.is_empty() {
            let insert = tx
                .prepare_cached(sql::INSERT_ATTACHMENT)
                .await
                .map_err(&fail)?;
            for attachment in &batch.attachments {
                tx.execute(
                    &insert,
                    &[&conversation, &attachment.id, &attachment.json.to_string()],
                )
                .await
                .map_err(insert_failed("attachment", &attachment.id))?;
            }
        }
        if batch.delivery.is_some() || batch.catalog.is_some() {
            let put = tx.prepare_cached(sql::PUT_STATE).await.map_err(&fail)?;
            for (key, value) in [("delivery", &batch.delivery), ("catalog", &batch.catalog)] {
                if let Some(value) = value {
                    tx.execute(&put, &[&conversation, &key, &value.to_string()])
                        .await
                        .map_err(&fail)?;
                }
            }
        }
        if !batch.meta.is_empty() {
            let put = tx.prepare_cached(sql::PUT_META).await.map_err(&fail)?;
            for (key, value) in &batch.meta {
                tx.execute(&put, &[&conversation, key, &value.to_string()])
                    .await
                    .map_err(&fail)?;
            }
        }
        if !batch.delivery_records.is_empty() {
            let put = tx.prepare_cached(sql::PUT_DELIVERY).await.map_err(&fail)?;
            for (id, value) in &batch.delivery_records {
                tx.execute(&put, &[&conversation, id, &value.to_string()])
                    .await
                    .map_err(&fail)?;
            }
        }
        tx.commit().await.map_err(commit_failed)
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Release the lease at once so the next opener need not wait for it to expire; the
        // token stays, so tokens only grow. Errors are moot: the lease then simply expires.
        // `Drop` cannot await. Inside a tokio runtime the release is a task on it, through
        // the pool: it never blocks the runtime, and it queues behind the `ROLLBACK` of a
        // commit cut on the same connection (that transaction holds the lease row). An opener
        // of the same conversation in this process waits for it (`lease::pending`). Outside
        // any runtime (a program ending after its last `block_on`) nothing else can run on
        // this thread: one connection of its own on a thread of its own does it, bounded by
        // `RELEASE_LIMIT`.
        let conversation = std::mem::take(&mut self.conversation);
        let token = self.token;
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let pool = self.pool.clone();
            let done = lease::releasing(&conversation);
            handle.spawn(async move {
                let release = async {
                    let client = pool.client("cannot release the lease").await.ok()?;
                    client
                        .execute(lease::RELEASE, &[&conversation, &token])
                        .await
                        .ok()
                };
                let _ = tokio::time::timeout(RELEASE_LIMIT, release).await;
                drop(done);
            });
            return;
        }
        let config = Config::clone(&self.pool.config);
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("ishiki-postgres-release".to_owned())
            .spawn(move || {
                release(config, &conversation, token);
                let _ = done.send(());
            });
        if spawned.is_ok() {
            let _ = finished.recv_timeout(RELEASE_LIMIT + Duration::from_secs(1));
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
            &[tokio_postgres::config::Host::Tcp("db.example".to_owned())]
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
            &[tokio_postgres::config::Host::Unix("/run/postgresql".into())]
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
