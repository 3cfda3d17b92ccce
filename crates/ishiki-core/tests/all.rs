//! The one integration-test binary of `ishiki-core`; the tests live in `suite/`.

mod suite;
