//! Test modules, one per concern.

mod catalog;
mod delta;
mod props;
mod retrieval;
#[cfg(feature = "semantic")]
mod semantic;
mod signatures;
mod typescript;
