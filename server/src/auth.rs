//! API tokens: `up_<id>_<secret>`. Only a salted SHA-256 of the secret is stored; it is
//! compared in constant time. Tokens are high-entropy, so a slow password hash buys nothing.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::store::{Store, StoreError};

const PREFIX: &str = "up_";

/// A freshly minted token: the string to hand the user once, and what to store.
pub struct MintedToken {
    pub token: String,
    pub token_id: String,
    pub salt: String,
    pub hash: String,
}

fn random_hex(uuids: usize) -> String {
    (0..uuids)
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect()
}

fn hash_secret(salt: &str, secret: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(salt.as_bytes());
    hasher.update(b":");
    hasher.update(secret.as_bytes());
    hex::encode(hasher.finalize())
}

/// Make a new token (about 240 bits of secret).
pub fn mint() -> MintedToken {
    let token_id = random_hex(1)[..16].to_owned();
    let secret = random_hex(2);
    let salt = random_hex(1);
    let hash = hash_secret(&salt, &secret);
    MintedToken {
        token: format!("{PREFIX}{token_id}_{secret}"),
        token_id,
        salt,
        hash,
    }
}

/// Split a presented token into id and secret.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    (ok(id) && ok(secret)).then_some((id, secret))
}

/// Create a user and its first token; returns the token string.
pub async fn create_user_with_token(store: &dyn Store, name: &str) -> Result<String, StoreError> {
    let user = store.create_user(name).await?;
    issue_token(store, &user.id).await
}

/// Issue another token for an existing user.
pub async fn issue_token(store: &dyn Store, user_id: &str) -> Result<String, StoreError> {
    let minted = mint();
    store
        .add_token(user_id, &minted.token_id, &minted.salt, &minted.hash)
        .await?;
    Ok(minted.token)
}

/// The authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUser {
    pub id: String,
    pub name: String,
}

/// Resolve a bearer token to its user, or `None` when it is not valid.
pub async fn verify(store: &dyn Store, token: &str) -> Result<Option<AuthUser>, StoreError> {
    let Some((id, secret)) = parse(token) else {
        return Ok(None);
    };
    let Some(row) = store.token(id).await? else {
        return Ok(None);
    };
    let presented = hash_secret(&row.salt, secret);
    let equal: bool = presented.as_bytes().ct_eq(row.hash.as_bytes()).into();
    Ok(equal.then_some(AuthUser {
        id: row.user_id,
        name: row.user_name,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_parse_and_hash() {
        let minted = mint();
        let (id, secret) = parse(&minted.token).expect("parses");
        assert_eq!(id, minted.token_id);
        assert_eq!(hash_secret(&minted.salt, secret), minted.hash);
        assert_ne!(mint().token, minted.token);
    }

    #[test]
    fn malformed_tokens_are_refused() {
        for token in [
            "",
            "up_",
            "up_abc",
            "up__abc",
            "xx_ab_cd",
            "up_zz_cd",
            "up_ab_c d",
        ] {
            assert_eq!(parse(token), None, "{token}");
        }
    }
}
