//! A child's stderr, read to its end into a bounded tail that errors about the server quote.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// The last lines a server wrote to stderr, quoted in errors about it.
#[derive(Debug, Default)]
pub(crate) struct StderrTail {
    lines: VecDeque<String>,
}

const STDERR_LINES: usize = 5;
const STDERR_LINE_CHARS: usize = 300;
/// The most bytes of one stderr line kept while it is read: enough for
/// [`STDERR_LINE_CHARS`] characters of any UTF-8. The rest of a longer line is skipped, so a
/// server that writes without newlines costs no memory.
const STDERR_LINE_BYTES: usize = STDERR_LINE_CHARS * 4;
/// How long a failed start waits for the child's last stderr lines.
const STDERR_GRACE: Duration = Duration::from_millis(500);

impl StderrTail {
    fn push(&mut self, line: &str) {
        let line: String = line.trim_end().chars().take(STDERR_LINE_CHARS).collect();
        self.keep(line);
    }

    /// A line cut at the limit, marked so the reader knows more followed.
    fn push_cut(&mut self, start: &[u8]) {
        let mut line: String = String::from_utf8_lossy(start)
            .chars()
            .take(STDERR_LINE_CHARS)
            .collect();
        line.push('…');
        self.keep(line);
    }

    fn keep(&mut self, line: String) {
        if line.trim().is_empty() {
            return;
        }
        if self.lines.len() == STDERR_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    pub(crate) fn quoted(&self) -> String {
        if self.lines.is_empty() {
            String::new()
        } else {
            let lines: Vec<&str> = self.lines.iter().map(String::as_str).collect();
            format!(" (its stderr ends: {})", lines.join(" | "))
        }
    }
}

/// Reads a child's stderr to its end into `tail`. At most [`STDERR_LINE_BYTES`] of a line are
/// held: a line that grows past them is quoted at once, cut, and the rest of it skipped until
/// its newline, so neither a line without end nor a flood of lines grows the host.
pub(crate) async fn read_stderr(stderr: impl AsyncRead + Unpin, tail: &Mutex<StderrTail>) {
    let mut reader = BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::new();
    // The current line went past the limit and was quoted already.
    let mut cut = false;
    loop {
        let (used, newline) = {
            let chunk = match reader.fill_buf().await {
                Ok(chunk) if !chunk.is_empty() => chunk,
                _ => break,
            };
            let newline = chunk.iter().position(|b| *b == b'\n');
            let used = newline.map_or(chunk.len(), |i| i + 1);
            if !cut {
                let text = &chunk[..newline.unwrap_or(chunk.len())];
                let room = STDERR_LINE_BYTES - line.len();
                if text.len() > room {
                    line.extend_from_slice(&text[..room]);
                    lock(tail).push_cut(&line);
                    line.clear();
                    cut = true;
                } else {
                    line.extend_from_slice(text);
                }
            }
            (used, newline.is_some())
        };
        reader.consume(used);
        if newline {
            if !cut {
                lock(tail).push(&String::from_utf8_lossy(&line));
            }
            line.clear();
            cut = false;
        }
    }
    if !cut && !line.is_empty() {
        lock(tail).push(&String::from_utf8_lossy(&line));
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits (boundedly, on failure paths only) until a stopped child's stderr is read to its end,
/// so an error can quote why it stopped.
pub(crate) async fn wait_for_stderr(mut done: tokio::sync::watch::Receiver<bool>) {
    let _ = tokio::time::timeout(STDERR_GRACE, done.wait_for(|done| *done)).await;
}

#[cfg(test)]
mod tests {
    //! The stderr reader on an in-memory pipe.

    use super::*;
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_stderr_line_without_end_is_quoted_cut_while_it_is_still_written() {
        let (mut writer, reader) = tokio::io::duplex(64 * 1024);
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let task = tokio::spawn({
            let tail = tail.clone();
            async move { read_stderr(reader, &tail).await }
        });
        // 8 MiB and no newline; the writer stays open, as a server that goes on writing does.
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..128 {
            writer
                .write_all(&chunk)
                .await
                .expect("the reader keeps reading");
        }
        let quoted = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let quoted = lock(&tail).quoted();
                if !quoted.is_empty() {
                    return quoted;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("quoted before the line ends");
        assert_eq!(quoted, format!(" (its stderr ends: {}…)", "x".repeat(300)));
        // The rest of the long line is skipped; the next lines are read as usual.
        writer
            .write_all(b"yyy\nlast words\n")
            .await
            .expect("writes");
        drop(writer);
        task.await.expect("the reader ends with the stream");
        assert_eq!(
            lock(&tail).quoted(),
            format!(" (its stderr ends: {}… | last words)", "x".repeat(300))
        );
    }
}
