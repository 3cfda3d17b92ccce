//! `cargo xtask bench --scale [OPTIONS]`: many conversations per process and one long
//! conversation (issue 16), from `crates/ishiki-cli/benches/scale.rs` in release mode.
//!
//! Options pass through to the bench: `--conversations N` (default 1000), `--steps S` (20),
//! `--concurrency 1,8,64`, `--long 100,1000,5000` (checkpoints of the long conversation, the
//! largest is how far it runs), `--shared-pool true|false` (one codemode worker pool for all
//! runtimes, or one each), `--store sqlite|postgres` (history in each conversation's SQLite,
//! or in one database of a throwaway PostgreSQL cluster, a conversation id each),
//! `--objects URL|moto` (artifacts and assets in object storage; `moto` starts a moto S3
//! server), `--durability normal|full`. A quick run: `--conversations 50 --long 100,500`.

use std::process::Command;

/// Runs the scale bench; its tables go to stdout as they are measured.
pub(crate) fn scale(args: &[String]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.args(["bench", "-p", "ishiki-cli", "--bench", "scale", "--"]);
    command.args(args);
    // The PostgreSQL backend is measured, not skipped: a missing server fails (and is
    // installed when root).
    command.env("ISHIKI_REQUIRE_ENGINES", "1");
    eprintln!(
        "$ cargo bench -p ishiki-cli --bench scale -- {}",
        args.join(" ")
    );
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the scale bench failed ({status})"))
    }
}
