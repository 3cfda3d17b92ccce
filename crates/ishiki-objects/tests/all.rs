//! The one integration-test binary of `ishiki-objects`; the tests live in `suite/`.

mod suite;
