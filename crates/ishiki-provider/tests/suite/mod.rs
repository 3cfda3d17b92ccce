//! The test modules.

mod body_limit;
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
