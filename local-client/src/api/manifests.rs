//! Incremental bundles: `POST /v1/manifests` and `PUT /v1/manifests/{bundle_id}/contents`.

use ultraplan_protocol::api::{BundleUploaded, ManifestAccepted};

use super::{ApiError, Client, REQUEST_TIMEOUT};

impl Client {
    /// `POST /v1/manifests` with a zstd'd JSON [`ManifestRequest`](ultraplan_protocol::api::ManifestRequest).
    pub async fn post_manifest(&self, zstd_json: Vec<u8>) -> Result<ManifestAccepted, ApiError> {
        let builder = self
            .request(reqwest::Method::POST, "/v1/manifests")
            .header(reqwest::header::CONTENT_TYPE, "application/zstd")
            .timeout(REQUEST_TIMEOUT)
            .body(zstd_json);
        self.json(builder).await
    }

    /// `PUT /v1/manifests/{bundle_id}/contents` with a streamed zstd'd tar of the contents.
    pub async fn put_contents(
        &self,
        bundle_id: &str,
        length: u64,
        body: reqwest::Body,
    ) -> Result<BundleUploaded, ApiError> {
        let builder = self
            .request(
                reqwest::Method::PUT,
                &format!("/v1/manifests/{bundle_id}/contents"),
            )
            .header(reqwest::header::CONTENT_TYPE, "application/zstd")
            .header(reqwest::header::CONTENT_LENGTH, length)
            .body(body);
        self.json(builder).await
    }
}
