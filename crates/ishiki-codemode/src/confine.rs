//! Defence in depth for a worker (SEC-1): at start-up and before its program, a worker drops
//! what it never needs, in layers, and reports which ones the kernel let it apply.
//!
//! | layer | stops |
//! | --- | --- |
//! | `descriptors` | every descriptor above stdin, stdout and stderr is closed first (`close_range`): one the host inherited without `CLOEXEC` is not the worker's to read or write |
//! | `capabilities` | a worker started as root keeps none of root's capabilities: the ambient, bounding, effective, permitted and inheritable sets are emptied (`reboot`, `sethostname`, `acct`, `swapoff` and every other capability check fail) |
//! | `no_new_privs` | gaining privileges through exec (setuid binaries, file capabilities); required by the two below |
//! | `landlock` | every filesystem access by path (read, write, create, remove, rename, link, truncate, device ioctl, exec), TCP bind/connect, signals to and abstract sockets of processes outside the worker |
//! | `seccomp` | an **allow-list**: only the system calls Boa, the allocator, threads and the pipe protocol make (measured with `strace` on real programs, see [`allowed_syscalls`]) pass; every other call fails with `EPERM` — paths of any kind (open, stat, chmod, utimes, xattrs, inotify), sockets, exec, fork (a `clone` without `CLONE_THREAD`), other processes' limits, priorities and signals (`tgkill` only to its own threads), mounts, namespaces, `ptrace`, `bpf`, `io_uring`, keys |
//! | `process_group` | the host starts the worker as the leader of its own process group and kills the whole group, so nothing the worker started could outlive it |
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
    /// How the worker was started, as its sandbox saw it (see
    /// [`Sandbox::worker_start`](crate::Sandbox::worker_start)); `None` in the report a worker
    /// sends about itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
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
        if let Some(start) = &self.start {
            writeln!(f, "{:<13} {:<13} {start}", "started", "")?;
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

/// The worker's start-up, in order: close inherited descriptors, set the resource limits, then
/// [`confine`]. The worker and the confinement probe both start through here, so the probe
/// tests exactly what a worker runs. The limits are the one fatal step (an unlimited worker
/// must not run a program); every other layer is reported.
pub(crate) fn start_up(memory_bytes: u64, cpu_seconds: u64) -> Result<ConfinementReport, String> {
    // First of all, before anything could use an inherited descriptor.
    let descriptors = crate::os::close_inherited_descriptors()
        .map(|open| match open {
            0 => "only stdin, stdout and stderr are open".to_owned(),
            n => format!("closed {n} inherited descriptor(s); only stdin, stdout and stderr stay"),
        })
        .map_err(|e| format!("close_range failed: {e}"));
    crate::os::apply_limits(memory_bytes, cpu_seconds)?;
    let mut report = confine();
    report.layers.insert(0, layer("descriptors", descriptors));
    Ok(report)
}

/// Applies every layer the kernel supports to this process (call it before starting threads:
/// Landlock binds the calling thread and the threads it starts later) and says how each fared.
pub(crate) fn confine() -> ConfinementReport {
    // Capabilities before no_new_privs and the filters: dropping them needs prctl and capset,
    // which the allow-list refuses.
    // Asked first: the allow-list refuses `getpgid`.
    let group = if crate::os::leads_its_process_group() {
        Ok("the worker leads its own process group; the host kills the whole group".to_owned())
    } else {
        Err("the worker shares its parent's process group (not started by a Sandbox)".to_owned())
    };
    let capabilities =
        crate::os::drop_capabilities().map_err(|e| format!("cannot drop capabilities: {e}"));
    let no_new_privs = crate::os::set_no_new_privs()
        .map(|()| "the worker and anything it could start never gain privileges".to_owned())
        .map_err(|e| format!("prctl(PR_SET_NO_NEW_PRIVS) failed: {e}"));
    let landlock = landlock_layer();
    let seccomp = seccomp_layer();
    ConfinementReport {
        start: None,
        layers: vec![
            layer("capabilities", capabilities),
            layer("no_new_privs", no_new_privs),
            layer("landlock", landlock),
            layer("seccomp", seccomp),
            layer("process_group", group),
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

/// One allowed system call: its number, and conditions on its arguments (all must hold;
/// none: any arguments).
#[cfg(target_os = "linux")]
type Allowed = (i64, Vec<seccompiler::SeccompCondition>);

/// The system calls a running worker makes, and nothing else. Measured, not guessed: `strace
/// -f` on the workers of this crate's whole test suite (tool calls, console, strings, JSON,
/// regular expressions, sorting, big arrays, promises, out-of-memory and stack-overflow ends),
/// keeping the calls made after the filter is installed. Two are kept without being seen, for a
/// reason: `clock_gettime` (the vDSO answers it, but falls back to the system call on a clock
/// source it cannot read, and Rust's clock panics if that fails) and `rt_sigreturn` (returning
/// from any signal handler; refusing it would crash the worker, not refuse anything). Seen and
/// left refused: glibc's `openat("/proc/sys/vm/overcommit_memory")`, which falls back quietly.
/// Arguments are pinned where a call could reach outside the worker: `clone` only starts
/// threads, `tgkill` only signals the worker's own threads (Rust's `abort`), `prctl` only names
/// a thread. `clone3` is answered `ENOSYS` in front of the list so the C library falls back to
/// `clone`, whose flags a filter can read.
#[cfg(target_os = "linux")]
pub(crate) fn allowed_syscalls(pid: u32) -> Result<Vec<Allowed>, seccompiler::BackendError> {
    use seccompiler::{SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond};
    let any = |call: i64| -> Allowed { (call, Vec::new()) };
    Ok(vec![
        // The pipes: stdin and stdout carry the protocol, stderr last words. Nothing else is
        // open, and nothing can be opened.
        any(libc::SYS_read),
        any(libc::SYS_write),
        // Memory: the allocator and Boa's heap.
        any(libc::SYS_brk),
        any(libc::SYS_mmap),
        any(libc::SYS_munmap),
        any(libc::SYS_mremap),
        any(libc::SYS_mprotect),
        any(libc::SYS_madvise),
        // Threads: the engine thread with its large stack.
        (
            libc::SYS_clone,
            vec![Cond::new(
                0,
                Len::Qword,
                Op::MaskedEq(libc::CLONE_THREAD as u64),
                libc::CLONE_THREAD as u64,
            )?],
        ),
        any(libc::SYS_futex),
        any(libc::SYS_set_robust_list),
        any(libc::SYS_rseq),
        any(libc::SYS_sched_getaffinity),
        any(libc::SYS_gettid),
        (
            libc::SYS_prctl,
            vec![Cond::new(0, Len::Dword, Op::Eq, libc::PR_SET_NAME as u64)?],
        ),
        // Signals: the stack-overflow handler's stack, masks, and Rust's abort.
        any(libc::SYS_sigaltstack),
        any(libc::SYS_rt_sigaction),
        any(libc::SYS_rt_sigprocmask),
        any(libc::SYS_rt_sigreturn),
        any(libc::SYS_getpid),
        // The orphan watch (`os::exit_when_orphaned`): is the host still the parent? It
        // sleeps between looks.
        any(libc::SYS_getppid),
        any(libc::SYS_clock_nanosleep),
        any(libc::SYS_nanosleep),
        (
            libc::SYS_tgkill,
            vec![Cond::new(0, Len::Dword, Op::Eq, u64::from(pid))?],
        ),
        // Hash seeds, the clock, and leaving.
        any(libc::SYS_getrandom),
        any(libc::SYS_clock_gettime),
        any(libc::SYS_exit),
        any(libc::SYS_exit_group),
    ])
}

#[cfg(target_os = "linux")]
fn seccomp_layer() -> Result<String, String> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule, TargetArch};
    use std::collections::BTreeMap;
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("no seccomp filter for {}", std::env::consts::ARCH))?;
    let pid = std::process::id();
    let allowed =
        allowed_syscalls(pid).map_err(|e| format!("cannot build the seccomp filter: {e}"))?;
    let count = allowed.len();
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (call, conditions) in allowed {
        let rule = if conditions.is_empty() {
            Vec::new()
        } else {
            vec![
                SeccompRule::new(conditions)
                    .map_err(|e| format!("cannot build the seccomp filter: {e}"))?,
            ]
        };
        rules.insert(call, rule);
    }
    let compile = |filter: Result<SeccompFilter, seccompiler::BackendError>| {
        let program: BpfProgram = filter
            .and_then(TryInto::try_into)
            .map_err(|e| format!("cannot build the seccomp filter: {e}"))?;
        Ok::<_, String>(program)
    };
    let allow_list = compile(SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    ))?;
    // clone3 passes its flags in memory, which a filter cannot read: ENOSYS makes the C
    // library start threads with clone instead. One filter, so this check goes in front of the
    // allow-list (a second filter could not be installed: the first refuses `seccomp`); BPF
    // jumps are relative, so the compiled program after it is unchanged.
    let errno_enosys = 0x0005_0000 | libc::ENOSYS as u32; // SECCOMP_RET_ERRNO | ENOSYS
    let mut program = vec![
        // A = seccomp_data.nr
        seccompiler::sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        },
        // if A == clone3, fall through to the return, else skip it
        seccompiler::sock_filter {
            code: 0x15,
            jt: 0,
            jf: 1,
            k: libc::SYS_clone3 as u32,
        },
        seccompiler::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: errno_enosys,
        },
    ];
    program.extend(allow_list);
    crate::os::install_seccomp_filter(&program)
        .map_err(|e| format!("the kernel refused the seccomp filter: {e}"))?;
    Ok(format!(
        "allow-list of {count} system calls (memory, threads, the pipes, time); every other call fails with EPERM: paths, stat, chmod, xattrs, inotify, sockets, exec, fork, other processes"
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
            start: Some("forked by the sandbox's fork server".into()),
        };
        assert!(!report.is_complete());
        assert_eq!(
            report.to_string(),
            "no_new_privs  enforced      never gains privileges\nlandlock      NOT ENFORCED  the kernel has no Landlock\nstarted                     forked by the sandbox's fork server\n"
        );
    }
}
