//! The test modules.

mod common;
mod http;
mod invariants;
mod parse;
mod prefix;
mod reasoning;
mod render;
mod schema;
mod snapshots;
mod stream;
