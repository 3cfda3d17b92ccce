//! The crate's one integration-test binary (`tests/suite/*`).

mod corpus;
mod suite;
