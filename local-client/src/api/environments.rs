//! `/v1/environments`: the user's named environments (docs/ARCHITECTURE.md §6.5).

use ultraplan_protocol::environments::{EnvironmentList, PutEnvironmentRequest};

use super::{ApiError, Client, REQUEST_TIMEOUT};

impl Client {
    /// `PUT /v1/environments/{name}`: create or replace one of the user's environments.
    pub async fn set_environment(&self, name: &str, definition: String) -> Result<(), ApiError> {
        let body = PutEnvironmentRequest { definition };
        let builder = self
            .request(reqwest::Method::PUT, &environment_path(name))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send(builder).await.map(drop)
    }

    /// `GET /v1/environments`: the user's and the shared ones.
    pub async fn environments(&self) -> Result<EnvironmentList, ApiError> {
        self.get("/v1/environments").await
    }

    /// `DELETE /v1/environments/{name}`.
    pub async fn delete_environment(&self, name: &str) -> Result<(), ApiError> {
        let builder = self
            .request(reqwest::Method::DELETE, &environment_path(name))
            .timeout(REQUEST_TIMEOUT);
        self.send(builder).await.map(drop)
    }
}

fn environment_path(name: &str) -> String {
    format!("/v1/environments/{}", super::segment(name))
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_one_path_segment() {
        let cases = [
            ("py312", "/v1/environments/py312"),
            ("node-20.lts", "/v1/environments/node-20%2Elts"),
            ("../x", "/v1/environments/%2E%2E%2Fx"),
        ];
        for (name, want) in cases {
            assert_eq!(super::environment_path(name), want);
        }
    }
}
