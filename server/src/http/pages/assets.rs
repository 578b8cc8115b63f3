//! CSS, JS and icons compiled into the binary, served under a content hash so browsers may
//! cache them forever.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

struct Asset {
    name: &'static str,
    mime: &'static str,
    body: &'static [u8],
    hash: String,
}

fn asset(name: &'static str, mime: &'static str, body: &'static [u8]) -> Asset {
    let hash = hex::encode(Sha256::digest(body))[..16].to_owned();
    Asset {
        name,
        mime,
        body,
        hash,
    }
}

static ASSETS: LazyLock<[Asset; 3]> = LazyLock::new(|| {
    [
        asset(
            "app.css",
            "text/css; charset=utf-8",
            include_bytes!("../../../../web/static/app.css"),
        ),
        asset(
            "app.js",
            "text/javascript; charset=utf-8",
            include_bytes!("../../../../web/static/app.js"),
        ),
        asset(
            "icon.svg",
            "image/svg+xml",
            include_bytes!("../../../../web/static/icon.svg"),
        ),
    ]
});

/// The URL of a bundled asset (`/static/<hash>/<name>`).
pub fn url(name: &str) -> String {
    ASSETS
        .iter()
        .find(|a| a.name == name)
        .map_or_else(String::new, |a| format!("/static/{}/{}", a.hash, a.name))
}

/// `GET /static/{hash}/{name}`: the asset when the hash is current, else 404.
pub async fn serve(Path((hash, name)): Path<(String, String)>) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name && a.hash == hash) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.mime));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_carry_the_content_hash() {
        let css = url("app.css");
        assert!(
            css.starts_with("/static/") && css.ends_with("/app.css"),
            "{css}"
        );
        assert_eq!(css.len(), "/static//app.css".len() + 16);
        assert_eq!(url("missing.css"), "");
    }
}
