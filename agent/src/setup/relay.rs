//! The egress relay: a loopback TCP port inside the setup sandbox joined to the runner's
//! egress socket, so ordinary `HTTP_PROXY` clients reach the proxy (docs/ARCHITECTURE.md
//! §6.5). The only socket the agent opens, and only during setup.

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread;

/// Listen on `127.0.0.1:port` and join each connection to a new connection to `socket`,
/// on threads that live as long as the process. Gives the address listened on.
pub fn start(port: u16, socket: PathBuf) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(("127.0.0.1", port))?;
    let addr = listener.local_addr()?;
    thread::Builder::new()
        .name("egress-relay".into())
        .spawn(move || accept_loop(&listener, &socket))?;
    tracing::info!(%addr, "egress relay listening");
    Ok(addr)
}

fn accept_loop(listener: &TcpListener, socket: &Path) {
    for client in listener.incoming() {
        let client = match client {
            Ok(client) => client,
            Err(e) => {
                tracing::warn!(error = %e, "egress relay cannot accept");
                continue;
            }
        };
        let socket = socket.to_owned();
        let spawned = thread::Builder::new()
            .name("egress-relay-conn".into())
            .spawn(move || join(client, &socket));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "egress relay cannot start a thread");
        }
    }
}

/// Copy both ways until both sides are done; each side's end of input shuts the other's
/// write half, so a close propagates.
fn join(mut client: TcpStream, socket: &Path) {
    let proxy = match UnixStream::connect(socket) {
        Ok(proxy) => proxy,
        Err(e) => {
            tracing::warn!(socket = %socket.display(), error = %e, "egress relay cannot reach the proxy");
            let _ = client.write_all(unreachable_response(&e.to_string()).as_bytes());
            return;
        }
    };
    let (Ok(mut client_in), Ok(mut proxy_out)) = (client.try_clone(), proxy.try_clone()) else {
        tracing::warn!("egress relay cannot clone a stream");
        return;
    };
    let upstream = thread::Builder::new()
        .name("egress-relay-up".into())
        .spawn(move || {
            let _ = std::io::copy(&mut client_in, &mut proxy_out);
            let _ = proxy_out.shutdown(Shutdown::Write);
        });
    let mut proxy_in = proxy;
    let _ = std::io::copy(&mut proxy_in, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    if let Ok(upstream) = upstream {
        let _ = upstream.join();
    }
}

fn unreachable_response(reason: &str) -> String {
    let body = format!("ultraplan egress relay: cannot reach the egress proxy: {reason}\n");
    format!(
        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}
