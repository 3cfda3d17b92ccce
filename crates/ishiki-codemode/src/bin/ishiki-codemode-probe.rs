//! The confinement probe for the test suite: starts exactly as a codemode worker does, then
//! tries what an escaped program would and prints what the kernel answered (see
//! `tests/suite/confinement.rs`). It serves no host and runs no JavaScript.

fn main() {
    ishiki_codemode::run_confinement_probe();
}
