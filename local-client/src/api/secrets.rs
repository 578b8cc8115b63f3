//! `/v1/secrets`: the user's secrets for environment setup (docs/ARCHITECTURE.md §6.5).
//! Values are sent, never received.

use ultraplan_protocol::secrets::{SecretList, SetSecretRequest};

use super::{ApiError, Client, REQUEST_TIMEOUT};

impl Client {
    /// `PUT /v1/secrets/{name}`: create or replace a secret.
    pub async fn set_secret(&self, name: &str, value: String) -> Result<(), ApiError> {
        let body = SetSecretRequest { value };
        let builder = self
            .request(reqwest::Method::PUT, &secret_path(name))
            .timeout(REQUEST_TIMEOUT)
            .json(&body);
        self.send(builder).await.map(drop)
    }

    /// `GET /v1/secrets`: names and when each was last set.
    pub async fn secrets(&self) -> Result<SecretList, ApiError> {
        self.get("/v1/secrets").await
    }

    /// `DELETE /v1/secrets/{name}`.
    pub async fn delete_secret(&self, name: &str) -> Result<(), ApiError> {
        let builder = self
            .request(reqwest::Method::DELETE, &secret_path(name))
            .timeout(REQUEST_TIMEOUT);
        self.send(builder).await.map(drop)
    }
}

/// The path of secret `name`: one segment, whatever the user typed ([`super::segment`]).
fn secret_path(name: &str) -> String {
    format!("/v1/secrets/{}", super::segment(name))
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_one_path_segment() {
        let cases = [
            ("PIP_TOKEN", "/v1/secrets/PIP_TOKEN"),
            ("a/b", "/v1/secrets/a%2Fb"),
            ("..", "/v1/secrets/%2E%2E"),
            ("x y?#", "/v1/secrets/x%20y%3F%23"),
            ("É", "/v1/secrets/%C3%89"),
        ];
        for (name, want) in cases {
            assert_eq!(super::secret_path(name), want);
        }
    }
}
