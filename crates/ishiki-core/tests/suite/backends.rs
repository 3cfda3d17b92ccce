//! The history stores every store conformance test runs against (PRJ-13, SEC-4): SQLite,
//! memory and PostgreSQL (a throwaway cluster shared by this test binary, a fresh database per
//! backend). One test body takes a [`Backend`] and must pass on each.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use ishiki_core::{Assembly, Clock, Durability, HistoryStore, MemoryStore, Runtime, SqliteStore};
use ishiki_postgres::testing::TestCluster;
use ishiki_postgres::{PostgresOptions, PostgresStore};

/// One history, opened again at every [`open`](Backend::open) (a reopen after a restart).
pub(crate) struct Backend {
    pub(crate) name: &'static str,
    open: Box<dyn Fn() -> Opening>,
}

/// A store being opened (PostgreSQL connects).
type Opening = Pin<Box<dyn Future<Output = Box<dyn HistoryStore>> + Send>>;

impl Backend {
    /// Opens the history again. A PostgreSQL store holds the conversation's lease until it is
    /// dropped, so drop the previous one first.
    pub(crate) async fn open(&self) -> Box<dyn HistoryStore> {
        (self.open)().await
    }

    /// A runtime on `dir` (artifacts, assets, workspace) whose history is this backend's.
    pub(crate) async fn runtime(
        &self,
        dir: &Path,
        assembly: Assembly,
        clock: Arc<dyn Clock>,
    ) -> Runtime {
        Runtime::builder(assembly, dir)
            .clock(clock)
            .store(self.open().await)
            .build()
            .await
            .unwrap_or_else(|e| panic!("{}: the runtime builds: {e}", self.name))
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A fresh, empty history in each store; without PostgreSQL on this machine (outside `cargo
/// xtask test`) the PostgreSQL one is skipped, saying so.
pub(crate) fn backends() -> Vec<Backend> {
    let mut backends = vec![sqlite(), memory()];
    backends.extend(postgres());
    backends
}

pub(crate) fn sqlite() -> Backend {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("history.sqlite");
    Backend {
        name: "sqlite",
        open: Box::new(move || {
            let _keep = &dir;
            let store = SqliteStore::open(&path, Durability::Normal).expect("sqlite opens");
            Box::pin(async move { Box::new(store) as Box<dyn HistoryStore> })
        }),
    }
}

pub(crate) fn memory() -> Backend {
    let store = MemoryStore::new();
    Backend {
        name: "memory",
        open: Box::new(move || {
            let store = store.clone();
            Box::pin(async move { Box::new(store) as Box<dyn HistoryStore> })
        }),
    }
}

/// A fresh database in this test binary's cluster, for the test or suite `what`; `None`, after
/// a line saying it was skipped, on a machine without PostgreSQL outside `cargo xtask test`.
pub(crate) fn postgres_url(what: &str) -> Option<String> {
    TestCluster::database_or_skip(what)
}

pub(crate) fn postgres() -> Option<Backend> {
    let url = postgres_url("the PostgreSQL store of a store test")?;
    Some(Backend {
        name: "postgres",
        open: Box::new(move || {
            let url = url.clone();
            Box::pin(async move {
                Box::new(
                    PostgresStore::connect(&url, "conversation-1", &PostgresOptions::default())
                        .await
                        .unwrap_or_else(|e| panic!("postgres opens: {e}")),
                ) as Box<dyn HistoryStore>
            })
        }),
    })
}
