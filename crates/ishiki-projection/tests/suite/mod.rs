//! Integration tests, one module per concern; `world` is the shared harness.

mod prj;
mod pruning;
mod snapshots;
mod state_machine;
mod world;
