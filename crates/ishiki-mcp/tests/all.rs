//! The one integration-test binary of `ishiki-mcp`; the tests live in `suite/`.

mod suite;
