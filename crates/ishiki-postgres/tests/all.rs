//! The one integration-test binary of `ishiki-postgres`; the tests live in `suite/`.

mod suite;
