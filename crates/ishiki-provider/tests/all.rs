//! Integration tests of `ishiki-provider`: one test binary, modules under `suite/`.

// Helpers outside `#[test]` functions unwrap too: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

mod suite;
