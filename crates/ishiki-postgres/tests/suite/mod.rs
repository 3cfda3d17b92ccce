//! Integration tests against a real PostgreSQL (a throwaway cluster per test binary run, a
//! fresh database per test). The store contract itself (the conformance suite) runs in
//! `ishiki-core`'s tests against every store; these cover what only this store has.

mod lease;
mod schema;

use ishiki_postgres::testing::TestCluster;

/// A fresh database in this binary's cluster.
pub(crate) fn database() -> String {
    TestCluster::shared()
        .unwrap_or_else(|e| panic!("the PostgreSQL test cluster starts: {e}"))
        .database()
        .unwrap_or_else(|e| panic!("a test database: {e}"))
}
