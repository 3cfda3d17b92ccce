//! Starting a worker process, reading its lines, and explaining its death from the exit
//! status and its last words on stderr.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{GroupChild, Inner, STDERR_TAIL, Worker, WorkerOut, WorkerPipe, WorkerStdin, lock};
use crate::config::{SandboxConfig, WorkerSpawn};
use crate::error::{CodemodeError, CodemodeErrorKind, human_bytes};
use crate::protocol::{ToHost, WORKER_ENV};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

/// Starts a worker process and waits for its `ready`: forked by the sandbox's fork server
/// when it has one, else executed.
pub(super) async fn spawn_worker(inner: &Inner) -> Result<Worker, CodemodeError> {
    let program = match &inner.config.worker {
        WorkerSpawn::CurrentExe => std::env::current_exe().map_err(|e| {
            CodemodeError::new(
                CodemodeErrorKind::Worker,
                format!("cannot find the current executable to start a worker: {e}"),
            )
        })?,
        WorkerSpawn::Program(path) => path.clone(),
        WorkerSpawn::InProcess => {
            return Err(CodemodeError::new(
                CodemodeErrorKind::Worker,
                "in-process mode has no workers",
            ));
        }
    };
    #[cfg(target_os = "linux")]
    let forked = if inner.config.fork_server {
        fork_worker(inner, &program).await
    } else {
        Err("off in the configuration".to_owned())
    };
    #[cfg(not(target_os = "linux"))]
    let forked: Result<_, String> = Err("Linux only".to_owned());
    let (child, stdin, stdout, stderr_pipe) = match forked {
        Ok(started) => {
            *lock(&inner.started_by) = Some("forked by the sandbox's fork server".to_owned());
            started
        }
        Err(reason) => {
            *lock(&inner.started_by) = Some(format!("executed (fork server: {reason})"));
            exec_worker(inner, &program)?
        }
    };
    ready(inner, &program, child, stdin, stdout, stderr_pipe).await
}

/// A worker's process and the host's ends of its pipes.
type Started = (GroupChild, WorkerStdin, WorkerPipe, WorkerPipe);

/// Executes `program` as a worker.
fn exec_worker(inner: &Inner, program: &std::path::Path) -> Result<Started, CodemodeError> {
    // A clean environment: nothing of the host's (keys, tokens) is in reach of the worker,
    // should a program ever get past the engine.
    let mut command = tokio::process::Command::new(program);
    command
        .env_clear()
        .env(WORKER_ENV, &inner.engine_env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group, which the host kills as a whole (see `kill_group`): should a
    // program ever get a process started, it does not outlive the worker.
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn().map_err(|e| {
        CodemodeError::new(
            CodemodeErrorKind::Worker,
            format!("cannot start the sandbox worker {}: {e}", program.display()),
        )
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(CodemodeError::new(
            CodemodeErrorKind::Worker,
            "the sandbox worker has no pipes",
        ));
    };
    Ok((
        GroupChild::Spawned(child),
        Box::new(stdin),
        Box::new(stdout),
        Box::new(stderr),
    ))
}

/// A worker forked by the sandbox's fork server, started on first use and again once it died
/// or retired; or why not (then the worker is executed, and a server that could not start is
/// tried again only after [`super::FORK_SERVER_RETRY`]).
#[cfg(target_os = "linux")]
async fn fork_worker(inner: &Inner, program: &std::path::Path) -> Result<Started, String> {
    use super::ForkSlot;
    use super::forked::ForkServer;
    use tokio::net::unix::pipe;
    // A server found dead on the way (killed, say) is started again, once.
    let mut attempts = 0;
    let (child, pipes) = loop {
        attempts += 1;
        let server = {
            let mut slot = inner.fork_server.lock().await;
            match &*slot {
                ForkSlot::Off(reason, since) if since.elapsed() < super::FORK_SERVER_RETRY => {
                    return Err(reason.clone());
                }
                ForkSlot::Running(server) if server.alive() => Arc::clone(server),
                // Never started, gone, retired (see `forked::RETIRE_AFTER`), or off long
                // enough to try again.
                ForkSlot::Running(_) | ForkSlot::NotStarted | ForkSlot::Off(..) => {
                    match ForkServer::start(program, &inner.engine_env).await {
                        Ok(server) => {
                            let server = Arc::new(server);
                            *slot = ForkSlot::Running(Arc::clone(&server));
                            server
                        }
                        Err(reason) => {
                            *slot = ForkSlot::Off(reason.clone(), std::time::Instant::now());
                            return Err(reason);
                        }
                    }
                }
            }
        };
        match server.fork().await {
            Ok(forked) => break forked,
            Err(_) if attempts < 2 && !server.alive() => {}
            Err(reason) => return Err(reason),
        }
    };
    let child = GroupChild::Forked(child);
    let wrap = |e: std::io::Error| format!("cannot use a worker's pipe: {e}");
    let stdin = pipe::Sender::from_owned_fd(pipes.stdin).map_err(wrap)?;
    let stdout = pipe::Receiver::from_owned_fd(pipes.stdout).map_err(wrap)?;
    let stderr = pipe::Receiver::from_owned_fd(pipes.stderr).map_err(wrap)?;
    Ok((child, Box::new(stdin), Box::new(stdout), Box::new(stderr)))
}

/// Waits for a started worker's `ready`, or explains why it never came.
async fn ready(
    inner: &Inner,
    program: &std::path::Path,
    mut child: GroupChild,
    stdin: WorkerStdin,
    stdout: WorkerPipe,
    mut stderr_pipe: WorkerPipe,
) -> Result<Worker, CodemodeError> {
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let tail = Arc::clone(&stderr);
    let stderr_done = tokio::spawn(async move {
        let mut chunk = [0u8; 1024];
        while let Ok(n) = stderr_pipe.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            let mut tail = lock(&tail);
            tail.extend_from_slice(&chunk[..n]);
            if tail.len() > STDERR_TAIL {
                let cut = tail.len() - STDERR_TAIL;
                tail.drain(..cut);
            }
        }
    });
    let mut out = WorkerOut {
        stdout: BufReader::new(stdout),
        stderr,
        stderr_done,
    };
    let mut buffer = Vec::new();
    let first = tokio::time::timeout(
        Duration::from_secs(30),
        next_line(&mut out.stdout, &mut buffer, 64 << 10),
    )
    .await;
    let problem = match first {
        Ok(Ok(Some(text))) => match serde_json::from_slice::<ToHost>(&text) {
            Ok(ToHost::Ready { confinement }) => {
                if confinement.is_some() {
                    lock(&inner.pool).confinement = confinement;
                }
                return Ok(Worker { child, stdin, out });
            }
            Ok(ToHost::Failed { kind, message }) => CodemodeError::new(kind, message),
            _ => CodemodeError::new(
                CodemodeErrorKind::Worker,
                format!(
                    "{} did not start as a sandbox worker (does its main() call run_if_worker() first?)",
                    program.display()
                ),
            ),
        },
        Ok(Ok(None) | Err(_)) => {
            let error = death(&mut child, &mut out, &inner.config, "while starting").await;
            // A forked worker is the fork server's copy: the question is for executed ones.
            if matches!(child, GroupChild::Spawned(_)) && error.kind() == CodemodeErrorKind::Worker
            {
                CodemodeError::new(
                    CodemodeErrorKind::Worker,
                    format!(
                        "{} (is {} a codemode worker? its main() must call run_if_worker() first)",
                        error.message(),
                        program.display()
                    ),
                )
            } else {
                error
            }
        }
        Err(_) => CodemodeError::new(
            CodemodeErrorKind::Worker,
            "the sandbox worker did not become ready within 30 s",
        ),
    };
    kill_group(&child);
    child.start_kill();
    Err(problem)
}

/// Kills a worker's process group (the worker and anything it started). Only while the worker
/// is not yet reaped (`id()` is `Some`): until then its pid, which is the group's id, cannot
/// be reused by another process.
pub(super) fn kill_group(child: &GroupChild) {
    if let Some(pid) = child.id() {
        crate::os::kill_process_group(pid);
    }
}

/// Reads one line without letting a worker make the host buffer without bound. Cancel-safe:
/// a partial line stays in `buffer`.
pub(super) async fn next_line(
    reader: &mut BufReader<WorkerPipe>,
    buffer: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(None);
        }
        if let Some(end) = memchr::memchr(b'\n', available) {
            buffer.extend_from_slice(&available[..end]);
            reader.consume(end + 1);
            return Ok(Some(std::mem::take(buffer)));
        }
        let n = available.len();
        buffer.extend_from_slice(available);
        reader.consume(n);
        if buffer.len() > cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "message too long",
            ));
        }
    }
}

/// Why a worker is gone, from its exit status and the end of its stderr.
pub(super) async fn death(
    child: &mut GroupChild,
    out: &mut WorkerOut,
    config: &SandboxConfig,
    when: &str,
) -> CodemodeError {
    // The worker's output ended: whatever else is in its group goes now, while the unreaped
    // worker still holds the group's id.
    kill_group(child);
    let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            child.start_kill();
            None
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), &mut out.stderr_done).await;
    let stderr = String::from_utf8_lossy(&lock(&out.stderr)).into_owned();
    let error = explain_exit(status, &stderr, config, when);
    // A forked worker ends with its fork server: say so when that is why.
    match child.server_gone() {
        Some(reason) => CodemodeError::new(error.kind(), format!("{} ({reason})", error.message())),
        None => error,
    }
}

/// The pure part of [`death`]: an exit status and stderr, in words.
pub(crate) fn explain_exit(
    status: Option<std::process::ExitStatus>,
    stderr: &str,
    config: &SandboxConfig,
    when: &str,
) -> CodemodeError {
    let limits = &config.limits;
    if stderr.contains("memory allocation of") || stderr.contains("out of memory") {
        return CodemodeError::new(
            CodemodeErrorKind::Memory,
            format!(
                "the program ran out of memory (the limit is {})",
                human_bytes(limits.memory_bytes)
            ),
        );
    }
    if stderr.contains("overflowed its stack") {
        return CodemodeError::new(
            CodemodeErrorKind::Limit,
            "the program overflowed the native stack (code or data nested too deeply)",
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if status.and_then(|s| s.signal()) == Some(libc::SIGXCPU) {
            return CodemodeError::new(
                CodemodeErrorKind::Timeout,
                format!(
                    "the program used more than {} s of CPU time",
                    limits.timeout.as_secs().saturating_add(2)
                ),
            );
        }
    }
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", crate::tool::clip(l.trim(), 200)))
        .unwrap_or_default();
    let status = status.map_or_else(|| "no exit status".to_owned(), |s| s.to_string());
    CodemodeError::new(
        CodemodeErrorKind::Worker,
        format!("the sandbox worker stopped {when} ({status}){last}"),
    )
}
