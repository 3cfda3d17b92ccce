//! Integration tests against a real PostgreSQL (a throwaway cluster per test binary run, a
//! fresh database per test). The store contract itself (the conformance suite) runs in
//! `ishiki-core`'s tests against every store; these cover what only this store has.

mod lease;
mod schema;

use ishiki_postgres::testing::TestCluster;

/// A fresh database in this binary's cluster for the test `test`; `None` (the test is skipped,
/// saying so) on a machine without PostgreSQL outside `cargo xtask test`.
pub(crate) fn database(test: &str) -> Option<String> {
    TestCluster::database_or_skip(test)
}

/// A plain client of the database `url`, for a test's own SQL; its connection runs on the
/// test's runtime.
pub(crate) async fn client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connects");
    tokio::spawn(connection);
    client
}
