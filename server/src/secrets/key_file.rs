//! The secrets key file (docs/ARCHITECTURE.md §6.5): 32 random bytes, mode 0600, made on first
//! use where absent. A file of another length, or one the group or others may read, is refused
//! rather than used or replaced. Replicas sharing a database must share the file.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::cipher::{Cipher, KEY_LEN};

/// Why the key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("secrets key file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("secrets key file {path} holds {len} bytes; it must hold exactly {KEY_LEN}")]
    WrongLength { path: PathBuf, len: u64 },
    #[error(
        "secrets key file {path} may be read by its group or others (mode {mode:04o}); run `chmod 600 {path}`"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("secrets key file {path} is not a regular file")]
    NotAFile { path: PathBuf },
    #[error("could not make a secrets key: the system's random source failed")]
    Random,
}

/// The key file, read once: the first use loads it (making it if absent), later uses share
/// the cipher.
#[derive(Debug)]
pub struct KeyFile {
    path: PathBuf,
    cipher: OnceLock<Arc<Cipher>>,
}

impl KeyFile {
    pub fn new(path: PathBuf) -> Self {
        KeyFile {
            path,
            cipher: OnceLock::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cipher over the file's key, loading (or making) the file on first use.
    pub fn cipher(&self) -> Result<Arc<Cipher>, KeyFileError> {
        if let Some(cipher) = self.cipher.get() {
            return Ok(cipher.clone());
        }
        let cipher = Arc::new(load_or_create(&self.path)?);
        Ok(self.cipher.get_or_init(|| cipher).clone())
    }
}

/// The cipher over the key in `path`, making the file with a fresh key when it is absent.
pub fn load_or_create(path: &Path) -> Result<Cipher, KeyFileError> {
    match std::fs::metadata(path) {
        Ok(_) => load(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path),
        Err(source) => Err(io(path, source)),
    }
}

fn io(path: &Path, source: std::io::Error) -> KeyFileError {
    KeyFileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn load(path: &Path) -> Result<Cipher, KeyFileError> {
    let meta = std::fs::metadata(path).map_err(|e| io(path, e))?;
    check(path, &meta)?;
    let key = std::fs::read(path).map_err(|e| io(path, e))?;
    // Checked again: the file may have changed between the two reads.
    if key.len() != KEY_LEN {
        return Err(wrong_length(path, key.len() as u64));
    }
    Cipher::new(&key).map_err(|_| wrong_length(path, key.len() as u64))
}

/// A usable key file is a regular file of 32 bytes that only its owner may read.
fn check(path: &Path, meta: &std::fs::Metadata) -> Result<(), KeyFileError> {
    if !meta.is_file() {
        return Err(KeyFileError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    if meta.len() != KEY_LEN as u64 {
        return Err(wrong_length(path, meta.len()));
    }
    Ok(())
}

fn wrong_length(path: &Path, len: u64) -> KeyFileError {
    KeyFileError::WrongLength {
        path: path.to_path_buf(),
        len,
    }
}

/// Write a fresh key to a private temporary file beside `path` and link it into place, so no
/// reader ever sees a partial key; when another process linked its key first, use that one.
fn create(path: &Path) -> Result<Cipher, KeyFileError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut key = [0u8; KEY_LEN];
    aws_lc_rs::rand::fill(&mut key).map_err(|_| KeyFileError::Random)?;
    let tmp = dir.join(format!(".secrets-key.{}", uuid::Uuid::new_v4().simple()));
    let written = write_private(&tmp, &key).and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => {
            tracing::info!(path = %path.display(), "made a new secrets key");
            Cipher::new(&key).map_err(|_| wrong_length(path, KEY_LEN as u64))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load(path),
        Err(e) => Err(io(path, e)),
    }
}

fn write_private(path: &Path, key: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(key)?;
    file.sync_all()
}

#[cfg(test)]
#[path = "key_file_tests.rs"]
mod tests;
