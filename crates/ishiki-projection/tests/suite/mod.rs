//! Integration tests, one module per concern; `world` is the shared harness.

mod cache;
mod prj;
mod provider;
mod pruning;
mod snapshots;
mod state_machine;
mod world;
