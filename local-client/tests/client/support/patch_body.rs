//! How the scripted server sends a patch: whole, streamed in chunks without a length, or
//! with a `Content-Length` that lies (the client must cap what it reads either way).

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};

use super::server::Config;

/// The patch as configured: whole, streamed in chunks, or with a `Content-Length` that lies.
pub fn patch_body(config: &Config) -> Response {
    use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
    if !config.patch_streamed && config.patch_claimed_length.is_none() {
        return ([(CONTENT_TYPE, "text/x-diff")], config.patch.clone()).into_response();
    }
    let chunks: Vec<Result<Bytes, std::io::Error>> = config
        .patch
        .chunks(1024)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let mut response =
        axum::body::Body::from_stream(futures_util::stream::iter(chunks)).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, "text/x-diff".parse().unwrap());
    if let Some(n) = config.patch_claimed_length {
        headers.insert(CONTENT_LENGTH, n.into());
    }
    response
}
