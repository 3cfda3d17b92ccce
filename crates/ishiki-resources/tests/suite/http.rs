//! The `http` feature (RES-2): an HTTP handler registered at run time, tested only against a
//! server on 127.0.0.1 that the test starts.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use std::net::IpAddr;

use ishiki_resources::{
    AddressPolicy, HttpOptions, HttpScheme, ReadResult, ResourceCenter, ResourceErrorKind,
    is_public,
};

fn png() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::RgbImage::new(2, 3)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// Answers one request according to its path.
fn serve(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
            break;
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_owned();
    let respond = |stream: &mut TcpStream, status: &str, kind: &str, body: &[u8], length: bool| {
        let mut head =
            format!("HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nConnection: close\r\n");
        if length {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body);
    };
    let port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
    let redirect = |stream: &mut TcpStream, to: &str| {
        let head = format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let _ = stream.write_all(head.as_bytes());
    };
    match path.as_str() {
        "/to-other-loopback" => redirect(&mut stream, &format!("http://127.0.0.2:{port}/text?q=1")),
        "/to-localhost" => redirect(&mut stream, &format!("http://localhost:{port}/text?q=1")),
        "/to-metadata" => redirect(&mut stream, "http://169.254.169.254/latest/meta-data/"),
        "/to-userinfo" => redirect(
            &mut stream,
            &format!("http://user:hunter2@127.0.0.1:{port}/text?q=1"),
        ),
        "/to-self" => redirect(&mut stream, &format!("http://127.0.0.1:{port}/text?q=1")),
        "/text?q=1" => respond(&mut stream, "200 OK", "text/html", "héllo".as_bytes(), true),
        // The server's type is wrong on purpose: the bytes decide.
        "/image" => respond(&mut stream, "200 OK", "text/plain", &png(), true),
        "/big" => respond(&mut stream, "200 OK", "text/plain", &[b'a'; 1000], true),
        "/big-unannounced" => respond(&mut stream, "200 OK", "text/plain", &[b'a'; 1000], false),
        "/silent" => {
            // Never answers: hold the connection until the client gives up.
            let mut sink = [0u8; 64];
            while reader.get_mut().read(&mut sink).is_ok_and(|n| n > 0) {}
        }
        _ => respond(&mut stream, "404 Not Found", "text/plain", b"no", true),
    }
}

/// A server on an ephemeral 127.0.0.1 port; each connection handled on its own thread.
fn start_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    base
}

/// `message` with the test server's port and the addresses a name resolved to (the host's
/// resolver decides whether `localhost` is also `::1`) redacted.
fn redact(message: &str, port: &str) -> String {
    let message = message.replace(port, "[port]");
    let marker = "the destination policy refuses (";
    match message.find(marker) {
        Some(at) if message.contains("resolves only to") => {
            let start = at + marker.len();
            let end = message[start..]
                .find(';')
                .map_or(message.len(), |e| start + e);
            format!("{}[addresses]{}", &message[..start], &message[end..])
        }
        _ => message,
    }
}

/// The test server's address, 127.0.0.1 written as a literal: the one destination the tests'
/// policy allows (not `localhost`, not any other loopback address).
fn only_the_test_server(host: &str, addr: IpAddr) -> bool {
    host == "127.0.0.1" && addr == IpAddr::from([127, 0, 0, 1])
}

/// A handler that may reach the test server on 127.0.0.1 and nothing else.
fn center(options: HttpOptions) -> ResourceCenter {
    center_with(options, Arc::new(only_the_test_server))
}

fn center_with(options: HttpOptions, policy: Arc<dyn AddressPolicy>) -> ResourceCenter {
    let center = ResourceCenter::new();
    center.register(Arc::new(
        HttpScheme::with_policy("http", options, policy).unwrap(),
    ));
    center
}

fn local_options() -> HttpOptions {
    HttpOptions {
        max_bytes: 100,
        timeout: Duration::from_millis(300),
        ..HttpOptions::default()
    }
}

#[tokio::test]
async fn res2_http_handler_reads_text_and_media() {
    let base = start_server();
    let c = center(local_options());
    assert_eq!(
        c.read(&format!("{base}/text?q=1#frag")).await.unwrap(),
        ReadResult::Text {
            text: "héllo".into(),
            source: None
        }
    );
    assert_eq!(
        c.read(&format!("{base}/image#x")).await.unwrap(),
        ReadResult::File {
            url: format!("{base}/image"),
            media_type: "image/png".into(),
            data: png(),
            source: None,
        }
    );
}

#[tokio::test]
async fn res2_http_handler_enforces_limits_and_reports_errors() {
    let base = start_server();
    let c = center(local_options());
    let mut lines = Vec::new();
    for (path, kind) in [
        ("/big", ResourceErrorKind::TooLarge),
        ("/big-unannounced", ResourceErrorKind::TooLarge),
        ("/missing", ResourceErrorKind::NotFound),
        ("/silent", ResourceErrorKind::Io),
    ] {
        let err = c.read(&format!("{base}{path}")).await.unwrap_err();
        assert_eq!(err.kind(), kind, "{path}: {err}");
        lines.push(format!(
            "{:?}: {}",
            err.kind(),
            err.message().replace(&base, "[server]")
        ));
    }
    // A port nobody listens on: bind, note the port, close.
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let err = c.read(&format!("{closed}/x")).await.unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::Io);
    assert!(
        err.message()
            .starts_with(&format!("cannot fetch `{closed}/x`: ")),
        "{err}"
    );
    lines.push(format!(
        "{:?}: {}",
        err.kind(),
        err.message().replace(&closed, "[closed]")
    ));
    let err = HttpScheme::new("ftp", HttpOptions::default()).unwrap_err();
    lines.push(format!("{:?}: {}", err.kind(), err.message()));
    insta::assert_snapshot!("http_error_messages", lines.join("\n"));
}

/// Issue 24: every loopback spelling reached an internal service. By default the handler
/// refuses loopback, private, link-local and metadata addresses, whatever the URL's spelling
/// and after resolving a name (SEC-2).
#[tokio::test]
async fn http_refuses_loopback_in_every_spelling_by_default() {
    let base = start_server();
    let port = base.rsplit(':').next().unwrap().to_owned();
    let c = ResourceCenter::new();
    c.register(Arc::new(HttpScheme::new("http", local_options()).unwrap()));
    let mut lines = Vec::new();
    for host in [
        "127.0.0.1",
        "2130706433",
        "0177.0.0.1",
        "0x7f.1",
        "127.1",
        "0.0.0.0",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "localhost",
    ] {
        let url = format!("http://{host}:{port}/text?q=1");
        let err = c.read(&url).await.unwrap_err();
        assert_eq!(err.kind(), ResourceErrorKind::NotAllowed, "{url}: {err}");
        lines.push(format!("{host}: {}", redact(err.message(), &port)));
    }
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[fd00:ec2::254]/",
    ] {
        let err = c.read(url).await.unwrap_err();
        assert_eq!(err.kind(), ResourceErrorKind::NotAllowed, "{url}: {err}");
    }
    insta::assert_snapshot!("http_loopback_refused", lines.join("\n"));
}

/// Every redirect hop is checked like the first URL: by its literal and, for a name, after
/// resolution; the policy allows the test server and nothing else.
#[tokio::test]
async fn http_checks_every_redirect_hop_against_the_policy() {
    let base = start_server();
    let c = center(local_options());
    assert_eq!(
        c.read(&format!("{base}/to-self")).await.unwrap(),
        ReadResult::Text {
            text: "héllo".into(),
            source: None
        },
        "a redirect the policy allows is followed"
    );
    let port = base.rsplit(':').next().unwrap().to_owned();
    let mut lines = Vec::new();
    for path in [
        "/to-other-loopback",
        "/to-localhost",
        "/to-metadata",
        "/to-userinfo",
    ] {
        let err = c.read(&format!("{base}{path}")).await.unwrap_err();
        assert_eq!(err.kind(), ResourceErrorKind::NotAllowed, "{path}: {err}");
        assert!(!err.message().contains("hunter2"), "{err}");
        lines.push(format!("{path}: {}", redact(err.message(), &port)));
    }
    insta::assert_snapshot!("http_redirects_refused", lines.join("\n"));
}

/// URL user info is never turned into credentials: such a URL is refused before any request,
/// and the password is not repeated.
#[tokio::test]
async fn http_refuses_urls_with_user_info() {
    let base = start_server();
    let c = center(local_options());
    let url = base.replace("http://", "http://admin:hunter2@");
    let err = c.read(&format!("{url}/text?q=1")).await.unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::NotAllowed);
    assert_eq!(
        err.message().replace(&base, "[server]"),
        "`[server]/text?q=1` carries user info (a name or password before `@`); credentials never come from a URL"
    );
}

/// An embedder's policy decides: one that allows loopback reaches the local server the
/// default refuses.
#[tokio::test]
async fn http_an_allowing_policy_reaches_a_local_server() {
    let base = start_server();
    let allow_loopback = |_: &str, addr: IpAddr| addr.is_loopback() || is_public(addr);
    let c = center_with(local_options(), Arc::new(allow_loopback));
    let port = base.rsplit(':').next().unwrap().to_owned();
    for url in [
        format!("{base}/text?q=1"),
        format!("http://localhost:{port}/text?q=1"),
    ] {
        assert_eq!(
            c.read(&url).await.unwrap(),
            ReadResult::Text {
                text: "héllo".into(),
                source: None
            },
            "{url}"
        );
    }
}

#[test]
fn is_public_refuses_internal_ranges_and_allows_the_internet() {
    for internal in [
        "0.0.0.0",
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.100.100.200",
        "192.0.0.192",
        "224.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::",
        "fe80::1",
        "fd00:ec2::254",
        "ff02::1",
    ] {
        let addr: IpAddr = internal.parse().unwrap();
        assert!(!is_public(addr), "{internal}");
    }
    for public in [
        "1.1.1.1",
        "93.184.215.14",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
    ] {
        let addr: IpAddr = public.parse().unwrap();
        assert!(is_public(addr), "{public}");
    }
}
