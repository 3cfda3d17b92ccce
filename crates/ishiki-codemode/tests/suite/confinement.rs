//! The worker's confinement seen from inside (SEC-1): a probe binary starts exactly as a worker
//! does and tries each call a program that escaped the engine could use to reach outside it.
//! Every one must be refused, so loosening any layer fails here. Linux only; run as root (as
//! CI does) it also proves that root's capabilities are gone.

/// What each attempt must end with: the errors that mean "refused by a layer".
#[cfg(target_os = "linux")]
const REFUSALS: &[(&str, &[&str])] = &[
    ("fchmodat", &["EPERM"]),
    ("fchmodat2", &["EPERM"]),
    ("utimensat", &["EPERM"]),
    ("setxattr", &["EPERM"]),
    ("getxattr", &["EPERM"]),
    ("statx /etc/shadow", &["EPERM"]),
    ("newfstatat /etc/shadow", &["EPERM"]),
    ("inotify_init1", &["EPERM"]),
    ("inotify_add_watch", &["EPERM"]),
    ("prlimit64 on another process", &["EPERM"]),
    ("setpriority on another process", &["EPERM"]),
    ("kill another process", &["EPERM"]),
    // Past the capability check these would fail with EINVAL or ENOENT.
    ("reboot (capability check)", &["EPERM"]),
    ("sethostname (capability check)", &["EPERM"]),
    ("acct (capability check)", &["EPERM"]),
    ("swapoff (capability check)", &["EPERM"]),
    ("fork", &["EPERM"]),
    // ENOSYS on purpose: the C library then starts threads with clone, whose flags are checked.
    ("clone3 of a process", &["ENOSYS"]),
    // Closed at start-up: the descriptor is simply not there.
    ("read an inherited descriptor", &["EBADF"]),
    // Landlock answers EACCES, seccomp EPERM; either layer alone refuses.
    ("open", &["EPERM", "EACCES"]),
    ("socket", &["EPERM"]),
    ("execve", &["EPERM"]),
];

#[cfg(target_os = "linux")]
#[test]
fn a_confined_worker_is_refused_every_call_that_reaches_outside_it() {
    use std::collections::BTreeMap;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = std::env::temp_dir().join(format!("ishiki-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("host-file.txt");
    std::fs::write(&file, "the host's file").expect("file");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("mode");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "the host's secret").expect("secret");
    // Another process whose limits and priority the probe tries to change: a `sleep` of our
    // own, which nothing would harm.
    let mut target = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep starts");
    // Started the way a Sandbox starts a worker (clean environment, own process group), from
    // a shell that opens descriptor 8 without CLOEXEC, as `ishiki scenario run … 8<secret` did.
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"exec 8<"$1"; exec "$2" "$3" "$4" "$5""#)
        .arg("sh")
        .arg(&secret)
        .arg(env!("CARGO_BIN_EXE_ishiki-codemode-probe"))
        .arg(&file)
        .arg(&dir)
        .arg(target.id().to_string())
        .env_clear()
        .process_group(0)
        .output()
        .expect("the probe runs");
    let _ = target.kill();
    let _ = target.wait();
    let mode = std::fs::metadata(&file).expect("file").permissions().mode() & 0o7777;
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let context = format!(
        "{}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{context}");
    let lines: BTreeMap<&str, &str> = stdout
        .lines()
        .filter_map(|line| line.split_once(": "))
        .collect();
    // Every layer but Landlock is in every Linux kernel this project supports; Landlock is
    // reported either way (seccomp alone refuses everything below).
    for name in [
        "descriptors",
        "capabilities",
        "no_new_privs",
        "seccomp",
        "process_group",
    ] {
        let state = lines.get(format!("layer {name}").as_str());
        assert!(
            state.is_some_and(|s| s.starts_with("enforced")),
            "layer {name}: {state:?}\n{context}"
        );
    }
    assert!(
        lines
            .get("layer descriptors")
            // Descriptor 8 at least; a test runner may pass its own (a jobserver's) too.
            .is_some_and(|s| s.contains("closed") && s.contains("inherited")),
        "{context}"
    );
    let mut problems = Vec::new();
    for (attempt, refusals) in REFUSALS {
        let answer = lines.get(format!("attempt {attempt}").as_str());
        let refused = answer.is_some_and(|answer| {
            refusals
                .iter()
                .any(|errno| *answer == format!("refused ({errno})"))
        });
        if !refused {
            problems.push(format!(
                "{attempt}: {answer:?}, want refused with {refusals:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}\n{context}", problems.join("\n"));
    assert_eq!(mode, 0o644, "the host file's mode changed");
}
