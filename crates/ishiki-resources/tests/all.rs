//! The one integration-test binary of `ishiki-resources`; the tests live in `suite/`.

// `cfg(test)` marks the helpers as test code too, so clippy's test allowances cover them.
#[cfg(test)]
mod suite;
