//! The `http` feature (RES-2): an HTTP handler registered at run time, tested only against a
//! server on 127.0.0.1 that the test starts.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use ishiki_resources::{HttpOptions, HttpScheme, ReadResult, ResourceCenter, ResourceErrorKind};

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
    match path.as_str() {
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

fn center(options: HttpOptions) -> ResourceCenter {
    let center = ResourceCenter::new();
    center.register(Arc::new(HttpScheme::new("http", options).unwrap()));
    center
}

fn local_options() -> HttpOptions {
    HttpOptions {
        max_bytes: 100,
        timeout: Duration::from_millis(300),
        use_env_proxy: false,
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
