//! Resumable bundle uploads: `HEAD` and `PATCH /v1/bundles/{sha256}/upload`.

use ultraplan_protocol::api::BundleUploaded;

use super::{ApiError, Client, REQUEST_TIMEOUT};

const UPLOAD_OFFSET: &str = "upload-offset";
const UPLOAD_LENGTH: &str = "upload-length";

/// What one `PATCH` achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// The server holds this many bytes; more are needed.
    Held(u64),
    /// The last byte arrived and the bundle is stored.
    Stored(BundleUploaded),
}

fn header_number(response: &reqwest::Response, name: &str) -> Option<u64> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

impl Client {
    /// `HEAD /v1/bundles/{sha256}/upload`: the bytes held of an upload in progress and its
    /// declared length, or `None` when there is none.
    pub async fn upload_offset(&self, sha256: &str) -> Result<Option<(u64, u64)>, ApiError> {
        let path = format!("/v1/bundles/{sha256}/upload");
        let builder = self.request(reqwest::Method::HEAD, &path);
        let response = match self.send(builder.timeout(REQUEST_TIMEOUT)).await {
            Ok(response) => response,
            Err(ApiError::Rejected { status: 404, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let held = header_number(&response, UPLOAD_OFFSET);
        let length = header_number(&response, UPLOAD_LENGTH);
        match held.zip(length) {
            Some(found) => Ok(Some(found)),
            None => Err(ApiError::decode(
                response.url().as_str(),
                "an upload in progress without Upload-Offset and Upload-Length",
            )),
        }
    }

    /// `PATCH /v1/bundles/{sha256}/upload`: `body` is the archive's bytes from `offset` on,
    /// of `length` in all.
    pub async fn upload_part(
        &self,
        sha256: &str,
        content_type: &str,
        (offset, length): (u64, u64),
        body: reqwest::Body,
    ) -> Result<Part, ApiError> {
        let path = format!("/v1/bundles/{sha256}/upload");
        let builder = self
            .request(reqwest::Method::PATCH, &path)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .header(reqwest::header::CONTENT_LENGTH, length - offset)
            .header(UPLOAD_OFFSET, offset)
            .header(UPLOAD_LENGTH, length)
            .body(body);
        let response = self.send(builder).await?;
        let url = response.url().to_string();
        if response.status() == reqwest::StatusCode::NO_CONTENT {
            return header_number(&response, UPLOAD_OFFSET)
                .map(Part::Held)
                .ok_or_else(|| ApiError::decode(&url, "a kept part without Upload-Offset"));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ApiError::unreachable(&url, &e))?;
        serde_json::from_slice(&bytes)
            .map(Part::Stored)
            .map_err(|e| ApiError::decode(&url, &e.to_string()))
    }
}
