//! The engine's side of a conversation as the host sees it: a worker process or an
//! in-process thread, behind one [`Peer`] trait.

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::spawn::{death, kill_group, next_line};
use super::{GroupChild, Inner, Worker, WorkerOut, WorkerStdin};
use crate::config::{EngineConfig, SandboxConfig};
use crate::engine::{Engine, Link, Reply};
use crate::error::{CodemodeError, CodemodeErrorKind};
use crate::protocol::{ToEngine, ToHost, line};

/// What the conversation hears from the engine's side.
pub(super) enum Event {
    Message(ToHost),
    /// The other side is gone; the error says why.
    Gone(CodemodeError),
}

/// The outcome of one tool call: the value and its JSON text, or a message for a JS `Error`.
pub(super) type ToolResult = Result<(Value, String), String>;

/// The engine's side of a conversation: a worker process or a thread.
pub(super) trait Peer {
    /// The next message (never, while `read` is false). Also moves queued replies along, so
    /// keep calling it.
    async fn next(&mut self, read: bool) -> Event;
    /// Queues the reply to tool call `id`.
    fn reply(&mut self, id: u64, result: ToolResult);
    /// Bytes of replies queued but not yet taken by the other side.
    fn backlog(&self) -> usize;
    /// Ends the other side now; nobody waits for it.
    fn stop(&mut self);
}

/// A worker process that has taken its program.
pub(super) struct ProcessPeer {
    pub(super) child: Option<GroupChild>,
    pub(super) stdin: WorkerStdin,
    pub(super) out: WorkerOut,
    /// Bytes for the worker's stdin, written from `outbox[written..]`.
    pub(super) outbox: Vec<u8>,
    pub(super) written: usize,
    pub(super) buffer: Vec<u8>,
    pub(super) cap: usize,
    pub(super) config: SandboxConfig,
}

impl ProcessPeer {
    pub(super) fn start(
        worker: Worker,
        run: &ToEngine,
        inner: &Inner,
    ) -> Result<Self, CodemodeError> {
        let Worker {
            mut child,
            stdin,
            out,
        } = worker;
        if !matches!(child.try_wait(), Ok(None)) {
            return Err(CodemodeError::new(
                CodemodeErrorKind::Worker,
                "the warm worker had exited",
            ));
        }
        let limits = &inner.config.limits;
        Ok(Self {
            child: Some(child),
            stdin,
            out,
            outbox: line(run).into_bytes(),
            written: 0,
            buffer: Vec::new(),
            cap: limits
                .max_transfer_bytes
                .max(limits.max_result_bytes)
                .max(limits.max_console_bytes)
                .saturating_add(64 << 10),
            config: inner.config.clone(),
        })
    }
}

/// Reads the worker's next message, or explains its death.
pub(super) async fn read_event(
    out: &mut WorkerOut,
    buffer: &mut Vec<u8>,
    cap: usize,
    child: &mut Option<GroupChild>,
    config: &SandboxConfig,
) -> Event {
    match next_line(&mut out.stdout, buffer, cap).await {
        Ok(Some(text)) => match serde_json::from_slice::<ToHost>(&text) {
            Ok(message) => Event::Message(message),
            Err(e) => Event::Gone(CodemodeError::new(
                CodemodeErrorKind::Worker,
                format!("the sandbox worker sent an unreadable message: {e}"),
            )),
        },
        Ok(None) => match child.as_mut() {
            Some(child) => {
                Event::Gone(death(child, out, config, "while running the program").await)
            }
            None => Event::Gone(CodemodeError::new(
                CodemodeErrorKind::Worker,
                "the worker is gone",
            )),
        },
        Err(e) => Event::Gone(CodemodeError::new(
            CodemodeErrorKind::Worker,
            format!("the sandbox worker broke the protocol: {e}"),
        )),
    }
}

impl Peer for ProcessPeer {
    async fn next(&mut self, read: bool) -> Event {
        loop {
            if self.written == self.outbox.len() {
                self.outbox.clear();
                self.written = 0;
                if !read {
                    return std::future::pending().await;
                }
                return read_event(
                    &mut self.out,
                    &mut self.buffer,
                    self.cap,
                    &mut self.child,
                    &self.config,
                )
                .await;
            }
            // Read while writing: a worker blocked on a full stdout must never wait for a
            // host blocked on a full stdin. Both operations are cancel-safe.
            tokio::select! {
                event = read_event(
                    &mut self.out,
                    &mut self.buffer,
                    self.cap,
                    &mut self.child,
                    &self.config,
                ), if read => return event,
                written = self.stdin.write(&self.outbox[self.written..]) => match written {
                    Ok(n) if n > 0 => self.written += n,
                    // The worker closed stdin: it is exiting, and its stdout will say why.
                    _ => self.written = self.outbox.len(),
                },
            }
        }
    }

    fn reply(&mut self, id: u64, result: ToolResult) {
        let text = match result {
            Ok((_, json)) => format!("{{\"t\":\"reply\",\"id\":{id},\"ok\":{json}}}\n"),
            Err(message) => line(&ToEngine::Reply {
                id,
                ok: None,
                err: Some(message),
            }),
        };
        self.outbox.extend_from_slice(text.as_bytes());
    }

    fn backlog(&self) -> usize {
        self.outbox.len() - self.written
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill_group(&child);
            child.start_kill();
            // Reaped (or released to its fork server) once it is gone; a status that never
            // comes does not keep the task.
            tokio::spawn(async move {
                let _ =
                    tokio::time::timeout(std::time::Duration::from_secs(10), child.wait()).await;
            });
        }
    }
}

/// An engine on a thread of this process ([`WorkerSpawn::InProcess`]).
pub(super) struct ThreadPeer {
    pub(super) events: mpsc::UnboundedReceiver<ToHost>,
    pub(super) replies: Option<std::sync::mpsc::Sender<Reply>>,
}

impl ThreadPeer {
    pub(super) fn start(config: &EngineConfig, run: ToEngine) -> Result<Self, CodemodeError> {
        let ToEngine::Run {
            code,
            tools,
            clock_ms,
        } = run
        else {
            return Err(CodemodeError::new(
                CodemodeErrorKind::Worker,
                "no program to run",
            ));
        };
        let (event_tx, events) = mpsc::unbounded_channel();
        let (replies, reply_rx) = std::sync::mpsc::channel();
        let config = config.clone();
        std::thread::Builder::new()
            .name("codemode".to_owned())
            .stack_size(config.stack_bytes)
            .spawn(move || {
                let link = ChannelLink {
                    events: event_tx.clone(),
                    replies: reply_rx,
                };
                let result = Engine::new(&config).and_then(|mut engine| {
                    engine.set_clock(clock_ms);
                    engine.run(&code, &tools, Box::new(link))
                });
                let message = match result.and_then(|finished| {
                    serde_json::from_str::<Value>(&finished.json)
                        .map(|value| (value, finished.unsent, finished.unanswered))
                        .map_err(|e| {
                            CodemodeError::new(
                                CodemodeErrorKind::Worker,
                                format!("bad result JSON: {e}"),
                            )
                        })
                }) {
                    Ok((value, unsent, unanswered)) => ToHost::Done {
                        value,
                        unsent,
                        unanswered,
                    },
                    Err(error) => ToHost::Failed {
                        kind: error.kind(),
                        message: error.message().to_owned(),
                    },
                };
                let _ = event_tx.send(message);
            })
            .map_err(|e| {
                CodemodeError::new(
                    CodemodeErrorKind::Worker,
                    format!("cannot start the engine thread: {e}"),
                )
            })?;
        Ok(Self {
            events,
            replies: Some(replies),
        })
    }
}

impl Peer for ThreadPeer {
    async fn next(&mut self, read: bool) -> Event {
        if !read {
            return std::future::pending().await;
        }
        match self.events.recv().await {
            Some(message) => Event::Message(message),
            None => Event::Gone(CodemodeError::new(
                CodemodeErrorKind::Worker,
                "the engine thread failed",
            )),
        }
    }

    fn reply(&mut self, id: u64, result: ToolResult) {
        if let Some(replies) = &self.replies {
            let _ = replies.send(Reply {
                id,
                result: result.map(|(value, _)| value),
            });
        }
    }

    fn backlog(&self) -> usize {
        // Replies go straight into the engine's channel.
        0
    }

    fn stop(&mut self) {
        // Without replies the engine ends at its next await; a spinning one runs on until
        // its instruction budget is spent (in-process limits are soft).
        self.replies = None;
    }
}

/// The engine's link over in-process channels.
pub(super) struct ChannelLink {
    pub(super) events: mpsc::UnboundedSender<ToHost>,
    pub(super) replies: std::sync::mpsc::Receiver<Reply>,
}

impl Link for ChannelLink {
    fn console(&mut self, line: &str) -> bool {
        self.events
            .send(ToHost::Console {
                line: line.to_owned(),
            })
            .is_ok()
    }

    fn call(&mut self, id: u64, tool: &str, input_json: &str) -> bool {
        let input = serde_json::from_str(input_json).unwrap_or(Value::Null);
        self.events
            .send(ToHost::Call {
                id,
                tool: tool.to_owned(),
                input,
            })
            .is_ok()
    }

    fn reply(&mut self) -> Option<Reply> {
        self.replies.recv().ok()
    }
}
