//! A small typed client of the server's `/v1` API (docs/ARCHITECTURE.md §3.1).

mod environments;
mod error;
mod manifests;
mod messages;
mod secrets;
mod uploads;

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use ultraplan_protocol::api::{
    BundleUploaded, CreateSessionRequest, Decision, Eligibility, EventsPage, PlanResource,
    SessionList,
};
use ultraplan_protocol::constants::MAX_EVENTS_PAGE;
use ultraplan_protocol::session::SessionResource;

pub use error::{ApiError, MAX_PATCH_BYTES_ENV};
pub use uploads::Part;

/// The most a patch download may hold, as the server caps the patches it stores.
pub const MAX_PATCH_BYTES: u64 = 64 * 1024 * 1024;

/// The cap on a patch download: [`MAX_PATCH_BYTES`], or `ULTRAPLAN_MAX_PATCH_BYTES`.
pub fn max_patch_bytes() -> u64 {
    std::env::var(MAX_PATCH_BYTES_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(MAX_PATCH_BYTES)
}

/// How long to wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an ordinary request may take, long-poll `wait` excluded.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long downloading a patch may take.
const PATCH_TIMEOUT: Duration = Duration::from_secs(300);

/// What archiving did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archived {
    /// This call archived the session.
    Now,
    /// It already was archived (the server said 409); as good as success.
    Already,
}

/// The API of one server, as one user.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    /// A client of `base` (`http://host:port`, no trailing slash) with an optional token.
    pub fn new(base: &str, token: Option<&str>) -> Result<Self, ApiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("ultraplan/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Unreachable {
                url: base.to_owned(),
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.map(str::to_owned),
        })
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, self.url(path));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    async fn send(&self, builder: reqwest::RequestBuilder) -> Result<reqwest::Response, ApiError> {
        let request = builder
            .build()
            .map_err(|e| ApiError::decode(&self.base, &format!("cannot build the request: {e}")))?;
        let url = request.url().to_string();
        let response = self
            .http
            .execute(request)
            .await
            .map_err(|e| ApiError::unreachable(&url, &e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response
            .bytes()
            .await
            .map_err(|e| ApiError::unreachable(&url, &e))?;
        Err(ApiError::from_response(status.as_u16(), &body))
    }

    async fn json<T: DeserializeOwned>(
        &self,
        builder: reqwest::RequestBuilder,
    ) -> Result<T, ApiError> {
        let response = self.send(builder).await?;
        let url = response.url().to_string();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| ApiError::unreachable(&url, &e))?;
        serde_json::from_slice(&bytes).map_err(|e| ApiError::decode(&url, &e.to_string()))
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        self.json(
            self.request(reqwest::Method::GET, path)
                .timeout(REQUEST_TIMEOUT),
        )
        .await
    }

    async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ApiError> {
        let builder = self.request(reqwest::Method::POST, path);
        self.json(builder.timeout(REQUEST_TIMEOUT).json(body)).await
    }

    /// `POST /v1/login-links`: a short-lived one-time link that logs a browser in and lands
    /// on `next` (a path such as `/sessions/ID`).
    pub async fn login_link(&self, next: &str) -> Result<LoginLink, ApiError> {
        self.post("/v1/login-links", &serde_json::json!({ "next": next }))
            .await
    }

    /// `GET /v1/eligibility`.
    pub async fn eligibility(&self) -> Result<Eligibility, ApiError> {
        self.get("/v1/eligibility").await
    }

    /// `HEAD /v1/bundles/{sha256}`: whether the server already holds the bundle.
    pub async fn has_bundle(&self, sha256: &str) -> Result<bool, ApiError> {
        let builder = self.request(reqwest::Method::HEAD, &format!("/v1/bundles/{sha256}"));
        match self.send(builder.timeout(REQUEST_TIMEOUT)).await {
            Ok(_) => Ok(true),
            Err(ApiError::Rejected { status: 404, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `PUT /v1/bundles/{sha256}` with a streamed body of `content_type` (`application/gzip`
    /// or, when the server advertises zstd, `application/zstd`).
    pub async fn upload_bundle(
        &self,
        sha256: &str,
        content_type: &str,
        length: u64,
        body: reqwest::Body,
    ) -> Result<BundleUploaded, ApiError> {
        let builder = self
            .request(reqwest::Method::PUT, &format!("/v1/bundles/{sha256}"))
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .header(reqwest::header::CONTENT_LENGTH, length)
            .body(body);
        self.json(builder).await
    }

    /// `POST /v1/sessions`.
    pub async fn create_session(
        &self,
        request: &CreateSessionRequest,
    ) -> Result<SessionResource, ApiError> {
        self.post("/v1/sessions", request).await
    }

    /// `GET /v1/sessions/{id}`.
    pub async fn session(&self, id: &str) -> Result<SessionResource, ApiError> {
        self.get(&format!("/v1/sessions/{id}")).await
    }

    /// `GET /v1/sessions?limit=`.
    pub async fn sessions(&self, limit: u32) -> Result<SessionList, ApiError> {
        let builder = self
            .request(reqwest::Method::GET, "/v1/sessions")
            .query(&[("limit", limit)])
            .timeout(REQUEST_TIMEOUT);
        self.json(builder).await
    }

    /// `GET /v1/sessions/{id}/events?after_id=&limit=&wait=`.
    pub async fn events(
        &self,
        id: &str,
        after_id: i64,
        wait: Option<Duration>,
    ) -> Result<EventsPage, ApiError> {
        let mut builder = self
            .request(reqwest::Method::GET, &format!("/v1/sessions/{id}/events"))
            .query(&[
                ("after_id", after_id),
                ("limit", i64::from(MAX_EVENTS_PAGE)),
            ])
            .query(&[("include", "session")]);
        let mut timeout = REQUEST_TIMEOUT;
        if let Some(wait) = wait.filter(|w| !w.is_zero()) {
            builder = builder.query(&[("wait", wait.as_secs())]);
            timeout += wait;
        }
        self.json(builder.timeout(timeout)).await
    }

    /// `GET /v1/sessions/{id}/plans`, oldest first.
    pub async fn plans(&self, id: &str) -> Result<Vec<PlanResource>, ApiError> {
        self.get(&format!("/v1/sessions/{id}/plans")).await
    }

    /// `POST /v1/sessions/{id}/plans/{tool_use_id}/decision`.
    pub async fn decide(
        &self,
        id: &str,
        tool_use_id: &str,
        decision: &Decision,
    ) -> Result<PlanResource, ApiError> {
        self.post(
            &format!("/v1/sessions/{id}/plans/{tool_use_id}/decision"),
            decision,
        )
        .await
    }

    /// `GET /v1/sessions/{id}/patch`: the raw unified diff remote execution produced, byte for
    /// byte (empty when it changed nothing). 409 `execution_running` while the agent still
    /// executes, 404 `no_patch` when nothing was executed. At most `limit` bytes are read: a
    /// `Content-Length` above it is refused before the body, and a body that runs past it is
    /// dropped as soon as it does, whatever the header said.
    pub async fn patch(&self, id: &str, limit: u64) -> Result<Vec<u8>, ApiError> {
        use futures_util::StreamExt;
        let builder = self
            .request(reqwest::Method::GET, &format!("/v1/sessions/{id}/patch"))
            .header(reqwest::header::ACCEPT, "text/x-diff")
            .timeout(PATCH_TIMEOUT);
        let response = self.send(builder).await?;
        let url = response.url().to_string();
        let too_large = || ApiError::TooLarge {
            url: url.clone(),
            limit,
        };
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ApiError::unreachable(&url, &e))?;
            if (body.len() + chunk.len()) as u64 > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// `POST /v1/sessions/{id}/archive`; a 409 (already archived) counts as success.
    pub async fn archive(&self, id: &str) -> Result<Archived, ApiError> {
        let builder = self
            .request(reqwest::Method::POST, &format!("/v1/sessions/{id}/archive"))
            .timeout(REQUEST_TIMEOUT);
        match self.send(builder).await {
            Ok(_) => Ok(Archived::Now),
            Err(ApiError::Rejected { status: 409, .. }) => Ok(Archived::Already),
            Err(e) => Err(e),
        }
    }
}

/// A one-time browser login link.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct LoginLink {
    pub url: String,
    pub expires_at: String,
}

/// `name` as one path segment: every byte outside `[A-Za-z0-9_-]` percent-encoded (dots too,
/// so `..` is never a path step), so any name the user types reaches the server (which says
/// what is wrong with it) as one segment.
fn segment(name: &str) -> String {
    let mut encoded = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"_-".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}
