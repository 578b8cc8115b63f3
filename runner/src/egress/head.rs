//! A proxy request's head: where it goes, and the head to send upstream
//! (docs/ARCHITECTURE.md §6.5). Pure.

/// What a client asked the proxy for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProxyRequest {
    /// `CONNECT host:port`: a tunnel.
    Connect { host: String, port: u16 },
    /// An absolute-form `http://` request; `head` is the head to send upstream.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Why a head was refused (answered 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HeadError {
    #[error("the request head is not valid UTF-8")]
    Encoding,
    #[error("malformed request line")]
    RequestLine,
    #[error("only HTTP/1.x is supported")]
    Version,
    #[error("CONNECT needs `host:port`")]
    ConnectTarget,
    #[error("https:// requests go through CONNECT")]
    Https,
    #[error("a proxy request needs an absolute http:// URL")]
    NotAbsolute,
    #[error("malformed URL authority")]
    Authority,
    #[error("malformed header line")]
    Header,
}

/// Headers that concern the proxy hop (or the connection), not the origin.
const HOP_HEADERS: [&str; 4] = [
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
];

/// The length of the head (through its blank line) when `buf` holds all of it.
pub(crate) fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4)
}

/// Parse a complete head (as delimited by [`head_end`]).
pub(crate) fn parse(head: &[u8]) -> Result<ProxyRequest, HeadError> {
    let text = std::str::from_utf8(head).map_err(|_| HeadError::Encoding)?;
    let (line, headers) = text.split_once("\r\n").ok_or(HeadError::RequestLine)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::RequestLine);
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(HeadError::RequestLine);
    }
    if !version.starts_with("HTTP/1.") {
        return Err(HeadError::Version);
    }
    if method == "CONNECT" {
        let (host, port) = split_authority(target).ok_or(HeadError::ConnectTarget)?;
        let port = port.ok_or(HeadError::ConnectTarget)?;
        return Ok(ProxyRequest::Connect { host, port });
    }
    forward(method, target, version, headers)
}

fn forward(
    method: &str,
    target: &str,
    version: &str,
    headers: &str,
) -> Result<ProxyRequest, HeadError> {
    if has_scheme(target, "https://") {
        return Err(HeadError::Https);
    }
    if !has_scheme(target, "http://") {
        return Err(HeadError::NotAbsolute);
    }
    let rest = &target["http://".len()..];
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.contains('@') {
        return Err(HeadError::Authority);
    }
    let (host, port) = split_authority(authority).ok_or(HeadError::Authority)?;
    let path = match path {
        "" => "/".to_owned(),
        p if p.starts_with('/') => p.to_owned(),
        p => format!("/{p}"),
    };
    let mut head = format!("{method} {path} {version}\r\n");
    for header in headers.split("\r\n").filter(|h| !h.is_empty()) {
        let (name, _) = header.split_once(':').ok_or(HeadError::Header)?;
        let name = name.to_ascii_lowercase();
        if !HOP_HEADERS.contains(&name.as_str()) {
            head.push_str(header);
            head.push_str("\r\n");
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    Ok(ProxyRequest::Forward {
        host,
        port: port.unwrap_or(80),
        head: head.into_bytes(),
    })
}

fn has_scheme(target: &str, scheme: &str) -> bool {
    target
        .get(..scheme.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
}

/// `host`, `host:port` or `[v6]:port`; the host comes back without brackets.
fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(rest) => {
            let (host, after) = rest.split_once(']')?;
            match after {
                "" => (host, None),
                _ => (host, Some(after.strip_prefix(':')?)),
            }
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let valid = |b: u8| b.is_ascii_alphanumeric() || b"-._:".contains(&b);
    if host.is_empty() || !host.bytes().all(valid) {
        return None;
    }
    let port = match port {
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse::<u16>().ok().filter(|p| *p > 0)?)
        }
        Some(_) => return None,
        None => None,
    };
    Some((host.to_owned(), port))
}

#[cfg(test)]
#[path = "head_tests.rs"]
mod tests;
