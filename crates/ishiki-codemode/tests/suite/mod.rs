//! Integration tests, one module per area; test names cite requirement IDs.

mod attachments;
mod boundary;
mod cm;
mod confinement;
mod fast_paths;
mod fork_server;
mod hostile;
mod memory;
mod pool;
mod sorting;
mod support;
