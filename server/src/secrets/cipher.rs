//! Sealing secret values at rest (docs/ARCHITECTURE.md §6.5): AES-256-GCM from aws-lc-rs,
//! a fresh random 96-bit nonce per value, and the owner id and name as associated data, so a
//! ciphertext moved to another owner or name (or altered in any byte) does not open.

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};

/// Length of the secrets key, in bytes.
pub const KEY_LEN: usize = 32;

/// Why a value could not be sealed or opened. None of them says anything about the value.
#[derive(Debug, thiserror::Error)]
pub enum CipherError {
    #[error("the secrets key must be {KEY_LEN} bytes")]
    BadKey,
    #[error("the value could not be sealed")]
    Seal,
    /// Wrong key, or a row moved to another owner or name, or altered.
    #[error("the sealed value does not open with this key, owner and name")]
    Open,
}

/// A sealed value as stored: the nonce, and the ciphertext with its tag appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
}

/// The secrets key, ready to seal and open values.
pub struct Cipher {
    key: RandomizedNonceKey,
}

/// The key is never shown.
impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cipher(<key>)")
    }
}

impl Cipher {
    /// A cipher over a 32-byte key.
    pub fn new(key: &[u8]) -> Result<Self, CipherError> {
        if key.len() != KEY_LEN {
            return Err(CipherError::BadKey);
        }
        let key = RandomizedNonceKey::new(&AES_256_GCM, key).map_err(|_| CipherError::BadKey)?;
        Ok(Cipher { key })
    }

    /// Seal `value` as `owner`'s secret `name`.
    pub fn seal(&self, owner: &str, name: &str, value: &[u8]) -> Result<Sealed, CipherError> {
        let mut in_out = value.to_vec();
        let nonce = self
            .key
            .seal_in_place_append_tag(Aad::from(aad(owner, name)), &mut in_out)
            .map_err(|_| CipherError::Seal)?;
        Ok(Sealed {
            nonce: nonce.as_ref().to_vec(),
            ciphertext: in_out,
        })
    }

    /// Open what [`Cipher::seal`] sealed as `owner`'s secret `name`.
    pub fn open(&self, owner: &str, name: &str, sealed: &Sealed) -> Result<Vec<u8>, CipherError> {
        if sealed.nonce.len() != NONCE_LEN {
            return Err(CipherError::Open);
        }
        let nonce =
            Nonce::try_assume_unique_for_key(&sealed.nonce).map_err(|_| CipherError::Open)?;
        let mut in_out = sealed.ciphertext.clone();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad(owner, name)), &mut in_out)
            .map_err(|_| CipherError::Open)?;
        Ok(plain.to_vec())
    }
}

/// The associated data: `owner` NUL `name` (neither can hold a NUL: ids are UUIDs and names
/// are checked), so no two (owner, name) pairs share it.
fn aad(owner: &str, name: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(owner.len() + 1 + name.len());
    aad.extend_from_slice(owner.as_bytes());
    aad.push(0);
    aad.extend_from_slice(name.as_bytes());
    aad
}

#[cfg(test)]
#[path = "cipher_tests.rs"]
mod tests;
