//! Secrets users keep on the server for their environments' setup phase (docs/ARCHITECTURE.md
//! §6.5): set, list and delete per owner, and [`Secrets::values_for`], which hands the
//! orchestrator the plain values an environment names. Values are sealed before they reach
//! the store ([`cipher`]) under the key in the key file ([`key_file`]), and never logged.

pub mod cipher;
pub mod key_file;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ultraplan_protocol::secret_names;
use ultraplan_protocol::secrets::SecretInfo;

use crate::store::{SecretRow, Store, StoreError, format_ms, now_ms};
use cipher::{CipherError, Sealed};
pub use key_file::{KeyFile, KeyFileError};

/// What can go wrong with a secret. No variant carries a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("{0}")]
    InvalidName(String),
    #[error("{0}")]
    InvalidValue(&'static str),
    #[error("no secret named {0}")]
    NotFound(String),
    /// Every name an environment asked for that the owner has not set, by name.
    #[error("secrets not set: {}", .0.join(", "))]
    Missing(Vec<String>),
    /// The stored value does not open: another key, or the row was altered or moved.
    #[error("secret {0} cannot be opened with this server's secrets key")]
    Unreadable(String),
    #[error(transparent)]
    Key(#[from] KeyFileError),
    #[error(transparent)]
    Cipher(#[from] CipherError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SecretsError {
    /// The stable code the API answers with.
    pub fn code(&self) -> &'static str {
        match self {
            SecretsError::InvalidName(_) => "invalid_secret_name",
            SecretsError::InvalidValue(_) => "invalid_secret_value",
            SecretsError::NotFound(_) => "not_found",
            SecretsError::Missing(_) => "secrets_missing",
            SecretsError::Unreadable(_) => "secret_unreadable",
            SecretsError::Key(_) | SecretsError::Cipher(_) => "secrets_key",
            SecretsError::Store(_) => "internal",
        }
    }
}

/// The secrets use cases over a store and the secrets key. Cheap to clone.
#[derive(Clone)]
pub struct Secrets {
    store: Arc<dyn Store>,
    key: Arc<KeyFile>,
}

impl Secrets {
    pub fn new(store: Arc<dyn Store>, key: Arc<KeyFile>) -> Self {
        Secrets { store, key }
    }

    /// Create or replace `owner`'s secret `name`.
    pub async fn set(&self, owner: &str, name: &str, value: &str) -> Result<(), SecretsError> {
        check_name(name)?;
        if let Some(problem) = secret_names::value_problem(value) {
            return Err(SecretsError::InvalidValue(problem));
        }
        let sealed = self.key.cipher()?.seal(owner, name, value.as_bytes())?;
        let now = now_ms();
        let row = SecretRow {
            owner_id: owner.to_owned(),
            name: name.to_owned(),
            nonce: sealed.nonce,
            ciphertext: sealed.ciphertext,
            created_at: now,
            updated_at: now,
        };
        self.store.put_secret(&row).await?;
        tracing::info!(owner, secret = name, "secret set");
        Ok(())
    }

    /// `owner`'s secrets by name, with when each was last set; never their values.
    pub async fn list(&self, owner: &str) -> Result<Vec<SecretInfo>, SecretsError> {
        let names = self.store.secret_names(owner).await?;
        let infos = names.into_iter().map(|(name, updated_at)| SecretInfo {
            name,
            updated_at: format_ms(updated_at),
        });
        Ok(infos.collect())
    }

    /// Delete `owner`'s secret `name`; [`SecretsError::NotFound`] when there is none.
    pub async fn delete(&self, owner: &str, name: &str) -> Result<(), SecretsError> {
        check_name(name)?;
        if !self.store.delete_secret(owner, name).await? {
            return Err(SecretsError::NotFound(name.to_owned()));
        }
        tracing::info!(owner, secret = name, "secret deleted");
        Ok(())
    }

    /// The plain values of `owner`'s secrets `names`, for an environment's setup phase.
    /// Every name must be set: otherwise [`SecretsError::Missing`] lists each one that is not.
    pub async fn values_for(
        &self,
        owner: &str,
        names: &[String],
    ) -> Result<BTreeMap<String, String>, SecretsError> {
        let wanted: BTreeSet<String> = names.iter().cloned().collect();
        for name in &wanted {
            check_name(name)?;
        }
        let wanted: Vec<String> = wanted.into_iter().collect();
        let rows = self.store.sealed_secrets(owner, &wanted).await?;
        let missing: Vec<String> = wanted
            .iter()
            .filter(|name| !rows.iter().any(|r| &r.name == *name))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(SecretsError::Missing(missing));
        }
        if rows.is_empty() {
            return Ok(BTreeMap::new());
        }
        let cipher = self.key.cipher()?;
        rows.into_iter()
            .map(|row| Ok::<_, SecretsError>((row.name.clone(), open(&cipher, owner, row)?)))
            .collect()
    }
}

/// What re-sealing every secret under a new key did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rotation {
    /// Secrets moved from the old key to the new one.
    pub resealed: usize,
    /// Secrets the new key opens already (an earlier, interrupted rotation).
    pub already: usize,
    /// `owner/name` of secrets neither key opens (left as they are).
    pub unreadable: Vec<String>,
}

/// Re-seal every stored secret from `old` to `new` (the operator then points every replica
/// at the new key file). Rows the new key opens are skipped, so running it again finishes an
/// interrupted rotation and picks up values set under the old key meanwhile; a value set
/// while its row is being re-sealed is never overwritten (the swap is conditional).
pub async fn rotate_key(
    store: &dyn Store,
    old: &KeyFile,
    new: &KeyFile,
) -> Result<Rotation, SecretsError> {
    let (old, new) = (old.cipher()?, new.cipher()?);
    let mut rotation = Rotation::default();
    for row in store.all_sealed_secrets().await? {
        let owner = row.owner_id.clone();
        let sealed = Sealed {
            nonce: row.nonce.clone(),
            ciphertext: row.ciphertext.clone(),
        };
        if new.open(&owner, &row.name, &sealed).is_ok() {
            rotation.already += 1;
            continue;
        }
        let Ok(plain) = old.open(&owner, &row.name, &sealed) else {
            rotation.unreadable.push(format!("{owner}/{}", row.name));
            continue;
        };
        let fresh = new.seal(&owner, &row.name, &plain)?;
        if store
            .reseal_secret(&row, &fresh.nonce, &fresh.ciphertext)
            .await?
        {
            rotation.resealed += 1;
        }
    }
    tracing::info!(
        resealed = rotation.resealed,
        already = rotation.already,
        unreadable = rotation.unreadable.len(),
        "secrets re-sealed under a new key"
    );
    Ok(rotation)
}

fn check_name(name: &str) -> Result<(), SecretsError> {
    match secret_names::name_problem(name) {
        Some(problem) => Err(SecretsError::InvalidName(problem)),
        None => Ok(()),
    }
}

fn open(cipher: &cipher::Cipher, owner: &str, row: SecretRow) -> Result<String, SecretsError> {
    let sealed = Sealed {
        nonce: row.nonce,
        ciphertext: row.ciphertext,
    };
    let unreadable = || SecretsError::Unreadable(row.name.clone());
    let plain = cipher
        .open(owner, &row.name, &sealed)
        .map_err(|_| unreadable())?;
    String::from_utf8(plain).map_err(|_| unreadable())
}
