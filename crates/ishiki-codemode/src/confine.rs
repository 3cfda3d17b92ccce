//! Defence in depth for a worker (SEC-1): after start-up and before its program, a worker drops
//! what it never needs, in three layers, and reports which ones the kernel let it apply.
//!
//! | layer | stops |
//! | --- | --- |
//! | `no_new_privs` | gaining privileges through exec (setuid binaries, file capabilities); required by the two below |
//! | `landlock` | every filesystem access by path (read, write, create, remove, rename, link, truncate, device ioctl, exec), TCP bind/connect, signals to and abstract sockets of processes outside the worker |
//! | `seccomp` | the system calls themselves: `execve`/`execveat`, `socket`/`connect`/`bind`/…, `open`/`openat`/`openat2`/`creat`, path changes (`unlink`, `rename`, `mkdir`, `chmod`, `chown`, `mount`, …), `ptrace`, `process_vm_*`, `kill`, `bpf`, `perf_event_open`, `userfaultfd`, `io_uring_*`, key management, namespaces — each fails with `EPERM` |
//!
//! Landlock and seccomp overlap on purpose: either alone keeps a program that escaped the
//! engine from reading a file, opening a socket or starting a process. What stays: the pipes the
//! worker already holds, memory (capped by `RLIMIT_AS`), CPU (`RLIMIT_CPU`, the host's wall
//! clock) and threads. A layer the kernel lacks is reported (see [`ConfinementReport`] and
//! `ishiki doctor`), never fatal: the rlimits and the engine's own limits still hold.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One confinement layer as a worker applied it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfinementLayer {
    /// `no_new_privs`, `landlock` or `seccomp`.
    pub name: String,
    /// Whether the layer is in force in the worker.
    pub enforced: bool,
    /// What the layer stops, or why it is not in force.
    pub detail: String,
}

/// What confines a sandbox worker: one entry per layer, in the order they are applied.
/// [`Sandbox::confinement`](crate::Sandbox::confinement) has the report of a started worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfinementReport {
    /// The layers, each enforced or not.
    pub layers: Vec<ConfinementLayer>,
}

impl ConfinementReport {
    /// The layer called `name`, if the worker tried it.
    #[must_use]
    pub fn layer(&self, name: &str) -> Option<&ConfinementLayer> {
        self.layers.iter().find(|layer| layer.name == name)
    }

    /// Whether every layer is in force.
    #[must_use]
    pub fn is_complete(&self) -> bool {
        !self.layers.is_empty() && self.layers.iter().all(|layer| layer.enforced)
    }
}

impl fmt::Display for ConfinementReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for layer in &self.layers {
            let state = if layer.enforced {
                "enforced"
            } else {
                "NOT ENFORCED"
            };
            writeln!(f, "{:<13} {state:<13} {}", layer.name, layer.detail)?;
        }
        Ok(())
    }
}

/// Starts one worker the way a [`Sandbox`](crate::Sandbox) would and returns what confines it:
/// the probe behind `ishiki doctor`. Blocking: call it outside an async runtime.
pub fn confinement_report(
    worker: crate::WorkerSpawn,
) -> Result<ConfinementReport, crate::CodemodeError> {
    use crate::{CodemodeError, CodemodeErrorKind, Sandbox, SandboxConfig};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CodemodeError::new(
                CodemodeErrorKind::Worker,
                format!("cannot start a runtime: {e}"),
            )
        })?;
    runtime.block_on(async {
        let sandbox = Sandbox::new(SandboxConfig {
            worker,
            prespawn: 1,
            ..SandboxConfig::default()
        });
        sandbox.warm().await?;
        sandbox.confinement().ok_or_else(|| {
            CodemodeError::new(
                CodemodeErrorKind::Worker,
                "in-process mode has no worker, so nothing confines its programs",
            )
        })
    })
}

fn layer(name: &str, result: Result<String, String>) -> ConfinementLayer {
    let (enforced, detail) = match result {
        Ok(detail) => (true, detail),
        Err(detail) => (false, detail),
    };
    ConfinementLayer {
        name: name.to_owned(),
        enforced,
        detail,
    }
}

/// Applies every layer the kernel supports to this process (call it before starting threads:
/// Landlock binds the calling thread and the threads it starts later) and says how each fared.
pub(crate) fn confine() -> ConfinementReport {
    let no_new_privs = crate::os::set_no_new_privs()
        .map(|()| "the worker and anything it could start never gain privileges".to_owned())
        .map_err(|e| format!("prctl(PR_SET_NO_NEW_PRIVS) failed: {e}"));
    let landlock = landlock_layer();
    let seccomp = seccomp_layer();
    ConfinementReport {
        layers: vec![
            layer("no_new_privs", no_new_privs),
            layer("landlock", landlock),
            layer("seccomp", seccomp),
        ],
    }
}

#[cfg(target_os = "linux")]
fn landlock_layer() -> Result<String, String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, LandlockStatus, Ruleset, RulesetAttr, RulesetStatus,
        Scope,
    };
    // ABI 6 (Linux 6.12) covers every filesystem right, TCP and the scopes; an older kernel
    // enforces what it knows (best effort), reported as partial.
    let abi = ABI::V6;
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|ruleset| ruleset.handle_access(AccessNet::from_all(abi)))
        .and_then(|ruleset| ruleset.scope(Scope::from_all(abi)))
        .and_then(|ruleset| ruleset.create())
        // No rule: nothing of the filesystem is reachable.
        .and_then(|ruleset| ruleset.restrict_self())
        .map_err(|e| format!("landlock failed: {e}"))?;
    let kernel = match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => format!("ABI {}", kernel_abi.unwrap_or(effective_abi as i32)),
        LandlockStatus::NotEnabled => {
            return Err("the kernel has Landlock but it is not enabled (lsm= boot option)".into());
        }
        LandlockStatus::NotImplemented => {
            return Err("the kernel has no Landlock (Linux 5.13 or later, built with it)".into());
        }
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(format!(
            "no filesystem access, no TCP, no signals out ({kernel})"
        )),
        RulesetStatus::PartiallyEnforced => Ok(format!(
            "no filesystem access as far as the kernel knows the rights ({kernel}; ABI 6 covers all)"
        )),
        RulesetStatus::NotEnforced => Err(format!("the kernel did not enforce it ({kernel})")),
    }
}

#[cfg(not(target_os = "linux"))]
fn landlock_layer() -> Result<String, String> {
    Err("Landlock exists on Linux only".to_owned())
}

/// System calls a worker never makes once it runs: they fail with `EPERM`.
#[cfg(target_os = "linux")]
fn denied_syscalls() -> Vec<i64> {
    let mut denied = vec![
        // Starting programs.
        libc::SYS_execve,
        libc::SYS_execveat,
        // Network and local sockets.
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept,
        libc::SYS_accept4,
        // Opening and changing anything by path.
        libc::SYS_openat,
        libc::SYS_openat2,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_mknodat,
        libc::SYS_mkdirat,
        libc::SYS_unlinkat,
        libc::SYS_renameat,
        libc::SYS_renameat2,
        libc::SYS_linkat,
        libc::SYS_symlinkat,
        libc::SYS_fchmodat,
        libc::SYS_fchownat,
        libc::SYS_truncate,
        libc::SYS_chdir,
        libc::SYS_chroot,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        // Other processes.
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kill,
        libc::SYS_pidfd_open,
        libc::SYS_pidfd_getfd,
        libc::SYS_pidfd_send_signal,
        // Kernel surface a JavaScript engine has no use for.
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
    ];
    #[cfg(target_arch = "x86_64")]
    denied.extend([
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_mknod,
        libc::SYS_mkdir,
        libc::SYS_rmdir,
        libc::SYS_unlink,
        libc::SYS_rename,
        libc::SYS_link,
        libc::SYS_symlink,
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_fork,
        libc::SYS_vfork,
    ]);
    denied
}

#[cfg(target_os = "linux")]
fn seccomp_layer() -> Result<String, String> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("no seccomp filter for {}", std::env::consts::ARCH))?;
    let denied = denied_syscalls();
    let count = denied.len();
    let rules = denied.into_iter().map(|call| (call, Vec::new())).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| format!("cannot build the seccomp filter: {e}"))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e| format!("cannot compile the seccomp filter: {e}"))?;
    seccompiler::apply_filter_all_threads(&program)
        .map_err(|e| format!("the kernel refused the seccomp filter: {e}"))?;
    Ok(format!(
        "{count} system calls fail with EPERM: exec, sockets, opening or changing files, ptrace, kill, bpf, io_uring, namespaces"
    ))
}

#[cfg(not(target_os = "linux"))]
fn seccomp_layer() -> Result<String, String> {
    Err("seccomp exists on Linux only".to_owned())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    /// Set in the child process that confines itself.
    const CHILD: &str = "ISHIKI_CONFINE_TEST_FILE";
    const TEST: &str = "confine::tests::a_confined_worker_cannot_open_files_sockets_or_programs";

    /// What a program that escaped the engine would try, from inside a confined process.
    fn escape_attempts(secret: &str) {
        let report = confine();
        eprintln!("{report}");
        assert!(
            report.layer("no_new_privs").is_some_and(|l| l.enforced),
            "{report}"
        );
        assert!(crate::os::no_new_privs(), "no_new_privs is not set");
        // Seccomp has been in every Linux kernel this project runs on since 3.17.
        assert!(
            report.layer("seccomp").is_some_and(|l| l.enforced),
            "{report}"
        );
        let open = std::fs::File::open(secret).map(|_| ());
        assert_eq!(
            open.as_ref().map_err(std::io::Error::kind),
            Err(ErrorKind::PermissionDenied),
            "a file opened: {open:?}"
        );
        let created = std::fs::write(format!("{secret}.new"), "x");
        assert!(created.is_err(), "a file was created");
        let tcp = std::net::TcpListener::bind("127.0.0.1:0");
        assert!(tcp.is_err(), "a TCP socket opened");
        let connect = std::net::TcpStream::connect("127.0.0.1:9");
        assert!(
            connect
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::PermissionDenied),
            "connect got further than the socket: {connect:?}"
        );
        let unix = std::os::unix::net::UnixDatagram::unbound();
        assert!(unix.is_err(), "a unix socket opened");
        let program = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg("exit 0")
            .status();
        assert!(program.is_err(), "a program started: {program:?}");
        eprintln!("confinement held");
    }

    #[test]
    fn a_confined_worker_cannot_open_files_sockets_or_programs() {
        // SEC-1
        if let Some(secret) = std::env::var_os(CHILD) {
            escape_attempts(&secret.to_string_lossy());
            return;
        }
        let dir = std::env::temp_dir().join(format!("ishiki-confine-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let secret = dir.join("secret.txt");
        std::fs::write(&secret, "the host's secret").expect("secret");
        // Unconfined, the file reads: the layers are what stops the child.
        assert_eq!(
            std::fs::read_to_string(&secret).expect("readable"),
            "the host's secret"
        );
        let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD, &secret)
            .output()
            .expect("the test binary runs");
        let _ = std::fs::remove_dir_all(&dir);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stderr.contains("confinement held"),
            "the confined child failed:\n{stdout}\n{stderr}"
        );
    }

    #[test]
    fn the_report_reads_one_line_per_layer() {
        let report = ConfinementReport {
            layers: vec![
                layer("no_new_privs", Ok("never gains privileges".into())),
                layer("landlock", Err("the kernel has no Landlock".into())),
            ],
        };
        assert!(!report.is_complete());
        assert_eq!(
            report.to_string(),
            "no_new_privs  enforced      never gains privileges\nlandlock      NOT ENFORCED  the kernel has no Landlock\n"
        );
    }
}
