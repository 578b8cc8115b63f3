//! What a secret may be called and hold (docs/ARCHITECTURE.md §6.5), as the server's store
//! and an environment file's `secrets` list both check it: a name becomes an
//! environment variable of the setup phase, so it is a portable variable name and never one
//! the sandbox sets itself; a value is text of bounded size without NUL bytes (which no
//! environment variable can carry).

use crate::secrets::{MAX_SECRET_NAME_CHARS, MAX_SECRET_VALUE_BYTES};

/// Variables the sandbox sets for the setup phase itself; a secret may not replace them.
pub const RESERVED: [&str; 14] = [
    "PATH",
    "HOME",
    "ULTRAPLAN_ENV",
    "VIRTUAL_ENV",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "LANG",
    "TMPDIR",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
];

/// Why `name` cannot name a secret, if it cannot: it must match `^[A-Z_][A-Z0-9_]{0,63}$`
/// and not be [`RESERVED`].
pub fn name_problem(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!(
            "{name} is set by the sandbox itself and cannot be a secret"
        ));
    }
    let problem = if name.is_empty() {
        "a secret name cannot be empty"
    } else if name.len() > MAX_SECRET_NAME_CHARS {
        "a secret name has at most 64 characters"
    } else if name.starts_with(|c: char| c.is_ascii_digit()) {
        "a secret name cannot start with a digit"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        "a secret name has only upper-case letters A-Z, digits and underscores"
    } else {
        return None;
    };
    Some(problem.to_owned())
}

/// Why `value` cannot be a secret's value, if it cannot.
pub fn value_problem(value: &str) -> Option<&'static str> {
    if value.len() > MAX_SECRET_VALUE_BYTES {
        Some("a secret value has at most 64 KiB")
    } else if value.contains('\0') {
        Some("a secret value cannot contain a NUL byte")
    } else {
        None
    }
}

#[cfg(test)]
#[path = "secret_names_tests.rs"]
mod tests;
