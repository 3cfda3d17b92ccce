//! The integration tests of `ishiki-toolsearch`, one binary: catalog steps, signatures,
//! deltas, retrieval quality and invariants.

// `cfg(test)` makes the helpers test code too, where unwrapping fixtures and printing the
// recall report are allowed (clippy.toml).
#[cfg(test)]
mod suite;
