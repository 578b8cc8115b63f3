//! What names a cached environment: the environment file, the lock files it names, the base
//! and who may use it (pure; docs/ARCHITECTURE.md §6.5).

use sha2::{Digest, Sha256};

/// Bumped when setup's own steps change what a snapshot holds.
const FORMAT: &str = "ultraplan-environment-1";

/// Everything a snapshot's key covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInputs<'a> {
    /// The environment file's bytes.
    pub file: &'a [u8],
    /// Each lock file the environment names, with its contents' digest (`None` if absent).
    pub lock_files: &'a [(String, Option<[u8; 32]>)],
    /// The base: the runner's toolchain fingerprint.
    pub base: &'a str,
    /// Who may reuse it: the owner's id.
    pub scope: &'a str,
}

/// The key: 64 hex digits of a length-prefixed SHA-256 over every input, so no two
/// different inputs can spell the same byte stream.
pub fn environment_key(inputs: &KeyInputs<'_>) -> String {
    let mut hash = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    field(FORMAT.as_bytes());
    field(inputs.scope.as_bytes());
    field(inputs.base.as_bytes());
    field(inputs.file);
    for (path, digest) in inputs.lock_files {
        field(path.as_bytes());
        field(digest.as_ref().map_or(&b"absent"[..], |d| &d[..]));
    }
    hex::encode(hash.finalize())
}

/// A digest of file contents, for [`KeyInputs::lock_files`].
pub fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(file: &[u8], locks: &[(String, Option<[u8; 32]>)], base: &str, scope: &str) -> String {
        environment_key(&KeyInputs {
            file,
            lock_files: locks,
            base,
            scope,
        })
    }

    #[test]
    fn every_input_changes_the_key() {
        let lock = vec![("requirements.txt".to_owned(), Some(digest(b"tinypkg==1")))];
        let base = key(b"[setup]", &lock, "host:x", "alice");
        assert_eq!(base.len(), 64);
        assert_eq!(base, key(b"[setup]", &lock, "host:x", "alice"), "stable");
        let other_lock = vec![("requirements.txt".to_owned(), Some(digest(b"tinypkg==2")))];
        let absent = vec![("requirements.txt".to_owned(), None)];
        for changed in [
            key(b"[setup] ", &lock, "host:x", "alice"),
            key(b"[setup]", &other_lock, "host:x", "alice"),
            key(b"[setup]", &absent, "host:x", "alice"),
            key(b"[setup]", &[], "host:x", "alice"),
            key(b"[setup]", &lock, "host:y", "alice"),
            key(b"[setup]", &lock, "host:x", "bob"),
        ] {
            assert_ne!(changed, base);
        }
        // Length prefixes: moving bytes between fields gives another key.
        assert_ne!(key(b"ab", &[], "c", "s"), key(b"a", &[], "bc", "s"));
    }
}
