//! Secret-looking file names, never bundled: the server and the container must not see them.
//!
//! Matching is on the file name only, ASCII case-insensitively:
//! - `.env` and every `.env*` (`.env.local`, `.envrc`, …) except the template `.env.example`;
//! - keys and keystores: `*.pem`, `*.key`, `*.p12`, `*.pfx`, `*.jks`, `*.keystore`;
//! - SSH private keys: `id_rsa`, `id_dsa`, `id_ecdsa`, `id_ed25519` and variants such as
//!   `id_ed25519_sk` or `id_rsa_work`, but not the public `*.pub` halves;
//! - `credentials*.json` (cloud service accounts);
//! - credential stores: `.netrc`, `_netrc`, `.git-credentials`, `.pgpass`.

use std::path::Path;

const KEY_EXTENSIONS: [&str; 6] = [".pem", ".key", ".p12", ".pfx", ".jks", ".keystore"];
const SSH_KEYS: [&str; 4] = ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"];
const CREDENTIAL_STORES: [&str; 4] = [".netrc", "_netrc", ".git-credentials", ".pgpass"];

/// True when the file name looks like it holds a secret.
pub fn is_secret(path: &Path) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    let name = name.to_string_lossy().to_ascii_lowercase();
    let name = name.as_str();
    is_env_file(name)
        || KEY_EXTENSIONS.iter().any(|ext| name.ends_with(ext))
        || (SSH_KEYS.iter().any(|key| name.starts_with(key)) && !name.ends_with(".pub"))
        || (name.starts_with("credentials") && name.ends_with(".json"))
        || CREDENTIAL_STORES.contains(&name)
}

fn is_env_file(name: &str) -> bool {
    name.starts_with(".env") && name != ".env.example"
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::is_secret;

    #[test]
    fn secrets_are_recognised() {
        for name in [
            ".env",
            ".env.local",
            ".env.production",
            ".envrc",
            "config/.ENV",
            "server.pem",
            "tls/private.key",
            "cert.p12",
            "cert.pfx",
            "release.jks",
            "app.keystore",
            "id_rsa",
            "home/.ssh/id_ed25519",
            "id_ed25519_sk",
            "id_rsa_work",
            "credentials.json",
            "credentials-prod.json",
            ".netrc",
            ".git-credentials",
            ".pgpass",
        ] {
            assert!(is_secret(Path::new(name)), "{name}");
        }
    }

    #[test]
    fn ordinary_files_are_not_secrets() {
        for name in [
            ".env.example",
            "env.rs",
            "environment.md",
            "id_rsa.pub",
            "id_ed25519.pub",
            "id_utils.rs",
            "keyboard.rs",
            "key.rs",
            "monkey.txt",
            "credentials.rs",
            "credentials.md",
            "pem.rs",
            ".gitignore",
            "",
        ] {
            assert!(!is_secret(Path::new(name)), "{name}");
        }
    }
}
