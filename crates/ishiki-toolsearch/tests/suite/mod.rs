//! Test modules, one per concern.

mod catalog;
mod delta;
mod props;
mod retrieval;
mod signatures;
