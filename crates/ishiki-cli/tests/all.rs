//! One integration-test binary for `ishiki-cli`: it runs the real `ishiki` binary.

mod suite;
