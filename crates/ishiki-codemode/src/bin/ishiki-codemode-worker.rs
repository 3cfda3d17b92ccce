//! The sandbox worker binary: serves one codemode program when started by a `Sandbox` with
//! `WorkerSpawn::Program` pointing here.

fn main() {
    ishiki_codemode::run_if_worker();
    eprintln!(
        "ishiki-codemode-worker runs codemode programs for a Sandbox (WorkerSpawn::Program); it is not meant to be started by hand"
    );
    std::process::exit(2);
}
