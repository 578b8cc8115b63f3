//! Which URLs `ultraplan open` may hand to a browser: http(s) URLs on the configured server's
//! origin (scheme, host and port), nothing else — a server cannot make the client open
//! `file:///etc/passwd`, a `javascript:` URL or another host.

use reqwest::Url;

/// Why a URL is not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    #[error("the configured server {0:?} is not an http(s) URL")]
    BadServer(String),
    #[error("{url:?} is not a URL")]
    NotAUrl { url: String },
    #[error("{url:?} is not an http(s) URL")]
    NotHttp { url: String },
    #[error("{url:?} is not on the server's origin {origin}")]
    Foreign { url: String, origin: String },
}

/// `scheme://host:port` of an http(s) URL.
fn origin(url: &Url) -> Option<String> {
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(format!("{}://{host}:{port}", url.scheme()))
}

/// `url`, parsed, when it is an http(s) URL on the origin of `server`. The error quotes the
/// URL sanitised (it came from the server).
pub fn check(url: &str, server: &str) -> Result<Url, OriginError> {
    let shown = crate::sanitize::line(url);
    let server_origin = Url::parse(server)
        .ok()
        .as_ref()
        .and_then(origin)
        .ok_or_else(|| OriginError::BadServer(crate::sanitize::line(server)))?;
    let parsed = Url::parse(url).map_err(|_| OriginError::NotAUrl { url: shown.clone() })?;
    let Some(url_origin) = origin(&parsed) else {
        return Err(OriginError::NotHttp { url: shown });
    };
    if url_origin != server_origin || !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(OriginError::Foreign {
            url: shown,
            origin: server_origin,
        });
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_servers_own_origin() {
        let server = "http://127.0.0.1:7878";
        let ok = |u: &str| check(u, server).is_ok();
        let cases = [
            ("http://127.0.0.1:7878/sessions/s1", true),
            ("http://127.0.0.1:7878/login/tok?next=/sessions/s1", true),
            ("HTTP://127.0.0.1:7878/x", true),
            ("http://127.0.0.1:7879/sessions/s1", false),
            ("https://127.0.0.1:7878/sessions/s1", false),
            ("http://localhost:7878/sessions/s1", false),
            ("http://evil.example/sessions/s1", false),
            ("http://127.0.0.1:7878@evil.example/", false),
            ("http://user:pw@127.0.0.1:7878/", false),
            ("file:///etc/passwd", false),
            ("javascript:alert(1)", false),
            ("data:text/html,<script>", false),
            ("/sessions/s1", false),
            ("", false),
        ];
        for (url, want) in cases {
            assert_eq!(ok(url), want, "{url}");
        }
        // Default ports count as the same origin.
        assert!(check("https://plan.example/x", "https://plan.example:443").is_ok());
        assert!(check("https://plan.example:8443/x", "https://plan.example").is_err());
        assert!(matches!(
            check("http://h/", "file:///srv"),
            Err(OriginError::BadServer(_))
        ));
        let err = check("file:///etc/passwd\u{1b}]0;X\u{7}", server).unwrap_err();
        assert!(!err.to_string().contains('\u{1b}'), "{err}");
    }
}
