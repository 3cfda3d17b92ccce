//! The two authorizers this crate ships: one for servers that approve without a person, one
//! for a person at this machine (a loopback redirect, RFC 8252).

use std::sync::Arc;
use std::time::Duration;

use super::TOKEN_REQUEST_TIMEOUT;
use crate::auth::Authorizer;

/// The most of a redirect's request head read by the [`LoopbackAuthorizer`].
const MAX_CALLBACK_BYTES: usize = 16 * 1024;
/// How long one browser connection to the loopback redirect may take to send its request.
const CALLBACK_READ_TIME: Duration = Duration::from_secs(10);

/// An authorizer for a server that approves without a person (a test server, an identity
/// provider that has approved this client before): it fetches the authorization URL itself,
/// without following redirects, and takes the redirect's `Location`.
#[derive(Debug, Clone)]
pub struct HeadlessAuthorizer {
    redirect_uri: String,
}

impl HeadlessAuthorizer {
    /// An authorizer that registers `redirect_uri` (nothing listens there; only the URL the
    /// authorization server redirects to is read).
    pub fn new(redirect_uri: impl Into<String>) -> HeadlessAuthorizer {
        HeadlessAuthorizer {
            redirect_uri: redirect_uri.into(),
        }
    }
}

#[async_trait::async_trait]
impl Authorizer for HeadlessAuthorizer {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn approval_time(&self) -> Duration {
        TOKEN_REQUEST_TIMEOUT
    }

    async fn authorize(&self, _server: &str, url: &str) -> Result<String, String> {
        // The page passed `endpoint_allowed` for the server (`Session::approve`): a host
        // written as local is so only for a server that is local too, and a name written as
        // public must resolve to a public address.
        let client = super::endpoints::client_for(url).map_err(|e| e.to_string())?;
        let response = client
            .get(url)
            .send()
            .await
            .map_err(|e| format!("the authorization page could not be fetched: {e}"))?;
        let status = response.status();
        if !status.is_redirection() {
            return Err(format!(
                "the authorization page answered {status} instead of redirecting (it needs a person)"
            ));
        }
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or("the authorization page redirected without a Location")?;
        let base = url::Url::parse(url).map_err(|e| format!("bad authorization URL: {e}"))?;
        base.join(location)
            .map(String::from)
            .map_err(|e| format!("the redirect's Location is no URL: {e}"))
    }
}

/// How a [`LoopbackAuthorizer`] shows the person where to sign in: `(server, url)`.
pub type ShowUrl = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// The authorizer of a program on the person's own machine (RFC 8252): it shows the
/// authorization URL (the embedder prints it or opens a browser) and receives the redirect on
/// `http://127.0.0.1:<port>/callback`, answering the browser with a page saying it may be
/// closed. What a browser sends there is bounded (16 KiB of request head, 10 s per
/// connection); a request without `code` and `state` (a favicon, a stray visit) is answered
/// 404 and the wait goes on.
pub struct LoopbackAuthorizer {
    listener: tokio::sync::Mutex<tokio::net::TcpListener>,
    port: u16,
    show: ShowUrl,
    approval_time: Duration,
}

impl std::fmt::Debug for LoopbackAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackAuthorizer")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl LoopbackAuthorizer {
    /// Listens on an unused port of 127.0.0.1; `show` is called with each URL to open.
    pub async fn bind(show: ShowUrl) -> std::io::Result<LoopbackAuthorizer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        Ok(LoopbackAuthorizer {
            listener: tokio::sync::Mutex::new(listener),
            port,
            show,
            approval_time: crate::auth::DEFAULT_APPROVAL_TIME,
        })
    }

    /// Sets how long a person may take.
    pub fn approval_time(mut self, time: Duration) -> LoopbackAuthorizer {
        self.approval_time = time;
        self
    }
}

#[async_trait::async_trait]
impl Authorizer for LoopbackAuthorizer {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn approval_time(&self) -> Duration {
        self.approval_time
    }

    async fn authorize(&self, server: &str, url: &str) -> Result<String, String> {
        use tokio::io::AsyncWriteExt;

        // Only the redirect of this request counts: its `state` is the one sent.
        let expected = url::Url::parse(url)
            .ok()
            .and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned())
            })
            .ok_or("the authorization URL carries no `state`")?;
        let listener = self.listener.lock().await;
        (self.show)(server, url);
        // Connections are read side by side (a browser's idle preconnect or a slow local
        // client cannot hold up the redirect), at most `MAX_CONNECTIONS` at once.
        let (tx, mut rx) = tokio::sync::mpsc::channel(MAX_CONNECTIONS);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, _) = accepted
                        .map_err(|e| format!("the redirect could not be received: {e}"))?;
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        continue;
                    };
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        if let Some(read) = read_head(stream).await {
                            let _ = tx.send(read).await;
                        }
                        drop(slot);
                    });
                }
                Some((mut stream, target)) = rx.recv() => {
                    let callback = format!("http://127.0.0.1:{}{target}", self.port);
                    let pairs: Vec<(String, String)> = url::Url::parse(&callback)
                        .ok()
                        .filter(|u| u.path() == "/callback")
                        .map(|u| u.query_pairs().into_owned().collect())
                        .unwrap_or_default();
                    let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v);
                    if get("state") != Some(&expected) {
                        let _ = stream.write_all(NOT_FOUND).await;
                        continue;
                    }
                    if let Some(reason) = get("error") {
                        let _ = stream
                            .write_all(page("Sign-in was refused. You can close this tab.").as_bytes())
                            .await;
                        return Err(format!("the authorization server answered `{reason}`"));
                    }
                    if get("code").is_none() {
                        let _ = stream.write_all(NOT_FOUND).await;
                        continue;
                    }
                    let _ = stream
                        .write_all(
                            page("Signed in. You can close this tab and go back to Ishiki.").as_bytes(),
                        )
                        .await;
                    return Ok(callback);
                }
            }
        }
    }
}

/// How many browser connections are read at once.
const MAX_CONNECTIONS: usize = 16;

const NOT_FOUND: &[u8] =
    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// The request target of a GET on `stream`, read within [`CALLBACK_READ_TIME`] and
/// [`MAX_CALLBACK_BYTES`]; `None` for anything else.
async fn read_head(mut stream: tokio::net::TcpStream) -> Option<(tokio::net::TcpStream, String)> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let read = tokio::time::timeout(CALLBACK_READ_TIME, async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await?;
            if n == 0 || head.len() + n > MAX_CALLBACK_BYTES {
                return Err(std::io::ErrorKind::InvalidData.into());
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<(), std::io::Error>(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return None;
    }
    let line = String::from_utf8_lossy(&head);
    let target = line
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("GET "))
        .and_then(|l| l.split(' ').next())?
        .to_owned();
    target.starts_with('/').then_some((stream, target))
}

fn page(text: &str) -> String {
    let body = format!("<!doctype html><title>Ishiki</title><p>{text}</p>\n");
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A browser's GET of `target`, answered within 10 s (or the test fails).
    async fn get(port: u16, target: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            stream
                .write_all(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        };
        tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .expect("the loopback answers")
    }

    #[tokio::test]
    async fn the_loopback_authorizer_takes_only_the_redirect_of_its_own_request() {
        let shown = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = shown.clone();
        let show: ShowUrl = Arc::new(move |server: &str, url: &str| {
            record.lock().unwrap().push(format!("{server} {url}"));
        });
        let authorizer = Arc::new(LoopbackAuthorizer::bind(show).await.unwrap());
        let port: u16 = authorizer
            .redirect_uri()
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/callback")
            .parse()
            .unwrap();
        let asked = "https://as/authorize?x=1&state=xyz";
        let waiting = {
            let authorizer = authorizer.clone();
            tokio::spawn(async move { authorizer.authorize("srv", asked).await })
        };
        // A connection that never sends its request holds nothing up.
        let _idle = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let not_found = |answer: String| answer.starts_with("HTTP/1.1 404");
        assert!(not_found(get(port, "/favicon.ico").await));
        assert!(not_found(get(port, "/callback?code=c").await));
        // A forged redirect (another state), even one saying the sign-in was refused, is not
        // the person's answer.
        assert!(not_found(
            get(port, "/callback?code=forged&state=other").await
        ));
        assert!(not_found(get(port, "/callback?error=x&state=other").await));
        let page = get(port, "/callback?code=abc&state=xyz").await;
        assert!(
            page.starts_with("HTTP/1.1 200") && page.contains("close this tab"),
            "{page}"
        );
        let callback = waiting.await.unwrap().unwrap();
        assert_eq!(
            callback,
            format!("http://127.0.0.1:{port}/callback?code=abc&state=xyz")
        );
        assert_eq!(*shown.lock().unwrap(), [format!("srv {asked}")]);

        let refused = {
            let authorizer = authorizer.clone();
            tokio::spawn(async move { authorizer.authorize("srv", "https://as/a?state=s").await })
        };
        get(port, "/callback?error=access_denied&state=s").await;
        let why = refused.await.unwrap().unwrap_err();
        assert!(why.contains("access_denied"), "{why}");
        let no_state = authorizer
            .authorize("srv", "https://as/a")
            .await
            .unwrap_err();
        assert!(no_state.contains("no `state`"), "{no_state}");
    }
}
