//! The egress proxy over a real Unix socket, with real TCP upstreams on 127.0.0.1.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};
use tokio::sync::oneshot;
use ultraplan_runner::egress::{BlockedAttempt, EgressProxy, NetworkPolicy, ProxyLimits};

const HTTP_BODY: &str = "hello from upstream";

fn policy(entries: &[String]) -> NetworkPolicy {
    NetworkPolicy::parse(entries).unwrap()
}

fn start(policy: NetworkPolicy, limits: ProxyLimits) -> (tempfile::TempDir, PathBuf, EgressProxy) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    let proxy = EgressProxy::start_with(&socket, policy, limits).unwrap();
    (dir, socket, proxy)
}

/// An upstream that echoes every byte back; gives its port.
async fn echo_upstream() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    port
}

/// An upstream that reads one request head, sends it to the receiver, answers and closes.
async fn http_upstream() -> (u16, oneshot::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let head = read_head(&mut stream).await;
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{HTTP_BODY}",
            HTTP_BODY.len()
        );
        stream.write_all(response.as_bytes()).await.unwrap();
        stream.shutdown().await.unwrap();
        let _ = tx.send(head);
    });
    (port, rx)
}

/// A port nothing listens on (bound once, then released).
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// Bytes up to and including the first blank line.
async fn read_head<R: AsyncReadExt + Unpin>(stream: &mut R) -> String {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = stream.read_u8().await.unwrap();
        head.push(byte);
    }
    String::from_utf8(head).unwrap()
}

/// Everything until the proxy closes (a reset after its answer counts as the close).
async fn read_to_close(stream: &mut UnixStream) -> String {
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => all.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&all).into_owned()
}

async fn request(socket: &Path, head: &str) -> String {
    let mut client = UnixStream::connect(socket).await.unwrap();
    client.write_all(head.as_bytes()).await.unwrap();
    read_to_close(&mut client).await
}

fn connect_head(target: &str) -> String {
    format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")
}

#[tokio::test]
async fn an_allowed_connect_tunnels_bytes_both_ways() {
    let port = echo_upstream().await;
    let (_dir, socket, proxy) = start(
        policy(&[format!("127.0.0.1:{port}")]),
        ProxyLimits::default(),
    );
    let mut client = UnixStream::connect(&socket).await.unwrap();
    let early = format!("{}early;", connect_head(&format!("127.0.0.1:{port}")));
    client.write_all(early.as_bytes()).await.unwrap();
    assert_eq!(
        read_head(&mut client).await,
        "HTTP/1.1 200 Connection Established\r\n\r\n"
    );
    client.write_all(b"ping").await.unwrap();
    let mut echoed = [0u8; 10];
    client.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"early;ping");
    assert_eq!(proxy.connections(), 1);
    assert!(proxy.blocked().is_empty());
}

#[tokio::test]
async fn an_allowed_absolute_form_get_reaches_the_upstream_in_origin_form() {
    let (port, upstream_head) = http_upstream().await;
    let (_dir, socket, proxy) = start(
        policy(&[format!("127.0.0.1:{port}")]),
        ProxyLimits::default(),
    );
    let head = format!(
        "GET http://127.0.0.1:{port}/simple/pkg/?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic dTpw\r\n\
         User-Agent: test\r\n\r\n"
    );
    let response = request(&socket, &head).await;
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.ends_with(HTTP_BODY), "{response}");
    let seen = upstream_head.await.unwrap();
    assert!(
        seen.starts_with("GET /simple/pkg/?x=1 HTTP/1.1\r\n"),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("Host: 127.0.0.1:{port}\r\n")),
        "{seen}"
    );
    assert!(seen.contains("User-Agent: test\r\n"), "{seen}");
    assert!(!seen.to_ascii_lowercase().contains("proxy-"), "{seen}");
    assert_eq!(proxy.connections(), 1);
}

#[tokio::test]
async fn a_port_not_listed_gets_403_and_is_recorded_with_its_count() {
    let allowed = echo_upstream().await;
    let other = echo_upstream().await;
    let (_dir, socket, proxy) = start(
        policy(&[format!("127.0.0.1:{allowed}"), "pypi.org".to_owned()]),
        ProxyLimits::default(),
    );
    for target in [
        format!("127.0.0.1:{other}"),
        "PyPI.org:8443".to_owned(),
        format!("127.0.0.1:{other}"),
    ] {
        let response = request(&socket, &connect_head(&target)).await;
        assert!(
            response.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{response}"
        );
        assert!(response.contains("Connection: close\r\n"), "{response}");
        assert!(
            response.contains("is not in this environment's network allow-list"),
            "{response}"
        );
    }
    let get = format!("GET http://127.0.0.1:{other}/ HTTP/1.1\r\n\r\n");
    let response = request(&socket, &get).await;
    assert!(response.contains(&format!(
        "ultraplan egress: 127.0.0.1:{other} is not in this environment's network allow-list"
    )));
    let blocked = |host: &str, port, attempts| BlockedAttempt {
        host: host.to_owned(),
        port,
        attempts,
    };
    assert_eq!(
        proxy.blocked(),
        vec![blocked("127.0.0.1", other, 3), blocked("pypi.org", 8443, 1)]
    );
    assert_eq!(proxy.blocked_overflow(), 0);
    assert_eq!(proxy.connections(), 0);
}

#[tokio::test]
async fn policy_none_refuses_everything_and_all_allows() {
    let port = echo_upstream().await;
    let target = format!("127.0.0.1:{port}");
    for (policy, status) in [
        (NetworkPolicy::None, "HTTP/1.1 403 Forbidden\r\n"),
        (
            NetworkPolicy::All,
            "HTTP/1.1 200 Connection Established\r\n",
        ),
    ] {
        let (_dir, socket, proxy) = start(policy, ProxyLimits::default());
        let mut client = UnixStream::connect(&socket).await.unwrap();
        client
            .write_all(connect_head(&target).as_bytes())
            .await
            .unwrap();
        let head = read_head(&mut client).await;
        assert!(head.starts_with(status), "{head}");
        assert_eq!(proxy.blocked().len(), usize::from(status.contains("403")));
    }
}

#[tokio::test]
async fn bad_heads_get_400() {
    let (_dir, socket, proxy) = start(NetworkPolicy::All, ProxyLimits::default());
    let oversized = format!(
        "GET http://127.0.0.1/ HTTP/1.1\r\nX-Filler: {}\r\n\r\n",
        "a".repeat(17 * 1024)
    );
    let cases = [
        (oversized.as_str(), "longer than 16384 bytes"),
        ("GET /relative HTTP/1.1\r\n\r\n", "absolute http:// URL"),
        ("GET https://127.0.0.1/ HTTP/1.1\r\n\r\n", "CONNECT"),
        ("CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n", "host:port"),
        ("nonsense\r\n\r\n", "malformed"),
    ];
    for (head, reason) in cases {
        let response = request(&socket, head).await;
        assert!(
            response.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{response}"
        );
        assert!(response.contains(reason), "{response}");
    }
    assert_eq!(proxy.connections(), 0);
}

#[tokio::test]
async fn an_unreachable_upstream_gets_502_with_the_reason() {
    let port = closed_port().await;
    let (_dir, socket, _proxy) = start(NetworkPolicy::All, ProxyLimits::default());
    let response = request(&socket, &connect_head(&format!("127.0.0.1:{port}"))).await;
    assert!(
        response.starts_with("HTTP/1.1 502 Bad Gateway\r\n"),
        "{response}"
    );
    assert!(
        response.contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "{response}"
    );
}

#[tokio::test]
async fn a_head_that_never_completes_is_closed() {
    let limits = ProxyLimits {
        head_deadline: Duration::from_millis(200),
        ..ProxyLimits::default()
    };
    let (_dir, socket, _proxy) = start(NetworkPolicy::All, limits);
    let mut client = UnixStream::connect(&socket).await.unwrap();
    client
        .write_all(b"GET http://127.0.0.1/ HTTP/1.1\r\n")
        .await
        .unwrap();
    // The client never finishes its head; the proxy closes without answering.
    assert_eq!(read_to_close(&mut client).await, "");
}

#[tokio::test]
async fn the_socket_is_world_writable_and_replaces_a_stale_one() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let proxy = EgressProxy::start(&socket, NetworkPolicy::None).unwrap();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o666);
    assert!(
        request(&socket, &connect_head("a.org:443"))
            .await
            .contains("403")
    );
    drop(proxy);

    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, "keep me").unwrap();
    assert!(EgressProxy::start(&file, NetworkPolicy::None).is_err());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[tokio::test]
async fn shutdown_closes_tunnels_and_removes_the_socket() {
    let port = echo_upstream().await;
    let (_dir, socket, proxy) = start(NetworkPolicy::All, ProxyLimits::default());
    let mut client = UnixStream::connect(&socket).await.unwrap();
    let head = connect_head(&format!("127.0.0.1:{port}"));
    client.write_all(head.as_bytes()).await.unwrap();
    read_head(&mut client).await;
    proxy.shutdown().await;
    assert!(!socket.exists());
    assert_eq!(read_to_close(&mut client).await, "");
    assert!(UnixStream::connect(&socket).await.is_err());
}

#[test]
fn starting_outside_a_runtime_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("egress.sock");
    assert!(EgressProxy::start(&socket, NetworkPolicy::All).is_err());
    assert!(!socket.exists());
}
