//! Named environments a user keeps on the server (docs/ARCHITECTURE.md §6.5): the bodies of
//! `/v1/environments` and the rule for their names. A named environment holds the same TOML
//! as a repository's `.ultraplan/environment.toml`; a session that names one at launch uses
//! it instead of the repository's file.

use serde::{Deserialize, Serialize};

/// Longest environment name, in characters.
pub const MAX_ENVIRONMENT_NAME_CHARS: usize = 64;
/// Largest environment definition, in bytes (the same bound as the repository's file).
pub const MAX_ENVIRONMENT_DEFINITION_BYTES: usize = 64 * 1024;

/// `PUT /v1/environments/{name}`: the definition to keep under that name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PutEnvironmentRequest {
    /// The TOML of an environment file (`[setup]`, `[agent]`, `[verify]`, …).
    pub definition: String,
}

/// One named environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvironmentInfo {
    pub name: String,
    /// Offered to every user of the server (set up by its operator); its snapshot is shared
    /// by all of them. Otherwise only its owner sees and uses it.
    pub shared: bool,
    /// The TOML it holds.
    pub definition: String,
    /// When it was last set (RFC 3339).
    pub updated_at: String,
}

/// `GET /v1/environments`: the caller's environments and the shared ones, by name (the
/// caller's own first where a name is both).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EnvironmentList {
    pub environments: Vec<EnvironmentInfo>,
}

/// Why `name` cannot name an environment, if it cannot: it must match
/// `^[a-z0-9][a-z0-9._-]{0,63}$` (lower case, so a name means the same on every system).
pub fn environment_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("an environment name cannot be empty");
    }
    if name.chars().count() > MAX_ENVIRONMENT_NAME_CHARS {
        return Some("an environment name has at most 64 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit()) {
        return Some("an environment name starts with a lower-case letter or a digit");
    }
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c);
    if !name.chars().all(allowed) {
        return Some("an environment name holds only a-z, 0-9, '.', '_' and '-'");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_portable_and_lower_case() {
        let long = "a".repeat(65);
        for (name, ok) in [
            ("py312", true),
            ("node-20.lts", true),
            ("0day_env", true),
            ("", false),
            ("Py", false),
            ("-lead", false),
            (".hidden", false),
            ("a/b", false),
            ("a b", false),
            ("ümlaut", false),
            (long.as_str(), false),
        ] {
            assert_eq!(environment_name_problem(name).is_none(), ok, "{name:?}");
        }
    }
}
