//! The test modules.

mod body_limit;
mod bounds;
mod common;
mod compaction;
mod fake;
mod http;
mod invariants;
mod oracle;
mod parse;
mod prefix;
mod reasoning;
mod render;
mod schema;
mod session;
mod snapshots;
mod stream;
