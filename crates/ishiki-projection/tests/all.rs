//! The one integration-test binary of `ishiki-projection`; the tests live in `suite/`.

mod suite;
