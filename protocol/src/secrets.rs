//! Secrets a user keeps on the server for the setup phase of their environments: the bodies of
//! `/v1/secrets` (docs/ARCHITECTURE.md §6.5). Values go in and never come back out.

use serde::{Deserialize, Serialize};

/// Longest secret value, in bytes.
pub const MAX_SECRET_VALUE_BYTES: usize = 64 * 1024;
/// Longest secret name, in characters.
pub const MAX_SECRET_NAME_CHARS: usize = 64;

/// `PUT /v1/secrets/{name}`: the value to keep under that name (created or replaced).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetSecretRequest {
    /// At most 64 KiB of UTF-8, without NUL bytes.
    pub value: String,
}

/// The value is never shown, not even in debug output.
impl std::fmt::Debug for SetSecretRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetSecretRequest")
            .field("value", &"<redacted>")
            .finish()
    }
}

/// One stored secret, without its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretInfo {
    /// The environment variable it becomes, e.g. `PIP_TOKEN`.
    pub name: String,
    /// When the value was last set (RFC 3339).
    pub updated_at: String,
}

/// `GET /v1/secrets`: the caller's secrets by name, never their values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretList {
    pub secrets: Vec<SecretInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_value() {
        let request = SetSecretRequest {
            value: "hunter2".to_owned(),
        };
        assert!(!format!("{request:?}").contains("hunter2"));
    }
}
