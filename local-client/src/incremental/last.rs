//! The manifest the server accepted last for a tree: kept per server, token and repository
//! under the client's state dir, so the next launch sends only what changed against it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use ultraplan_protocol::api::ManifestEntry;

/// An accepted manifest and the bundle id the server gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    pub bundle_id: String,
    pub entries: Vec<ManifestEntry>,
}

/// A file name for `parts` (each length-prefixed, so no two lists share one).
pub fn key(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Where the accepted manifest of `key` is kept under `state_dir`.
pub fn path(state_dir: &Path, key: &str) -> PathBuf {
    state_dir.join("manifests").join(key)
}

/// What a saved manifest starts with. Earlier clients saved JSON, which is still read.
const MAGIC: &[u8] = b"ultraplan-accepted-v1\n";

/// The accepted manifest at `path`, if there is a readable one.
pub fn load(path: &Path) -> Option<Accepted> {
    let bytes = fs::read(path).ok()?;
    match bytes.strip_prefix(MAGIC) {
        Some(rest) => decode(rest),
        None => serde_json::from_slice(&bytes).ok(),
    }
}

/// Keep `accepted` at `path` (through a temporary file beside it).
pub fn save(path: &Path, accepted: &Accepted) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let partial = path.with_extension(format!("tmp{}", std::process::id()));
    fs::write(&partial, encode(accepted)?)?;
    fs::rename(&partial, path)
}

/// `MAGIC`, the bundle id, then per entry its path and `f` (0644) or `x` (0755) with the size
/// and the BLAKE3 digest, or `l` with the link's target; texts are length-prefixed.
fn encode(accepted: &Accepted) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(MAGIC.len() + 64 + accepted.entries.len() * 120);
    out.extend_from_slice(MAGIC);
    put(&mut out, &accepted.bundle_id);
    for entry in &accepted.entries {
        put(&mut out, &entry.path);
        match (&entry.target, entry.size, entry.blake3.as_deref()) {
            (Some(target), _, _) => {
                out.push(b'l');
                put(&mut out, target);
            }
            (None, Some(size), Some(blake3)) => {
                let mut digest = [0u8; 32];
                hex::decode_to_slice(blake3, &mut digest).map_err(io::Error::other)?;
                out.push(if entry.mode == Some(0o755) {
                    b'x'
                } else {
                    b'f'
                });
                out.extend_from_slice(&size.to_le_bytes());
                out.extend_from_slice(&digest);
            }
            _ => return Err(io::Error::other(format!("{}: no content", entry.path))),
        }
    }
    Ok(out)
}

fn decode(mut rest: &[u8]) -> Option<Accepted> {
    let bundle_id;
    (bundle_id, rest) = take(rest)?;
    let mut entries = Vec::new();
    while !rest.is_empty() {
        let path;
        (path, rest) = take(rest)?;
        let (&tag, after) = rest.split_first()?;
        let entry = match tag {
            b'l' => {
                let target;
                (target, rest) = take(after)?;
                ManifestEntry {
                    path,
                    mode: None,
                    size: None,
                    blake3: None,
                    target: Some(target),
                }
            }
            b'f' | b'x' => {
                let (size, after) = after.split_first_chunk::<8>()?;
                let (digest, after) = after.split_first_chunk::<32>()?;
                rest = after;
                ManifestEntry {
                    path,
                    mode: Some(if tag == b'x' { 0o755 } else { 0o644 }),
                    size: Some(u64::from_le_bytes(*size)),
                    blake3: Some(hex::encode(digest)),
                    target: None,
                }
            }
            _ => return None,
        };
        entries.push(entry);
    }
    Some(Accepted { bundle_id, entries })
}

fn put(out: &mut Vec<u8>, text: &str) {
    let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

fn take(bytes: &[u8]) -> Option<(String, &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
    let text = std::str::from_utf8(rest.get(..len)?).ok()?.to_owned();
    Some((text, rest.get(len..)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted() -> Accepted {
        let file = |path: &str, mode, fill: u8| ManifestEntry {
            path: path.to_owned(),
            mode: Some(mode),
            size: Some(u64::from(fill) * 1000),
            blake3: Some(hex::encode([fill; 32])),
            target: None,
        };
        Accepted {
            bundle_id: "ab".repeat(32),
            entries: vec![
                file("a b/é.rs", 0o644, 1),
                file("run.sh", 0o755, 2),
                ManifestEntry {
                    path: "link".to_owned(),
                    mode: None,
                    size: None,
                    blake3: None,
                    target: Some("a b".to_owned()),
                },
            ],
        }
    }

    #[test]
    fn saved_manifests_read_back_and_damaged_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        save(&path, &accepted()).unwrap();
        assert_eq!(load(&path), Some(accepted()));
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert_eq!(load(&path), None, "a truncated file is no manifest");
        // What earlier clients saved still reads.
        fs::write(&path, serde_json::to_vec(&accepted()).unwrap()).unwrap();
        assert_eq!(load(&path), Some(accepted()));
    }
}
