//! API tokens: `up_<id>_<secret>`. Only a salted SHA-256 of the secret is stored; it is
//! compared in constant time. Tokens are high-entropy, so a slow password hash buys nothing.
//!
//! Runner tokens (`urt_<secret>`) are another kind, in a table of their own: a runner of the
//! fleet presents one to claim and serve sessions and download their bundles, nothing else.
//! Only the SHA-256 of the whole token is stored, and a token is found by that hash, so the
//! secret is never compared byte by byte. Each kind checks its own prefix and looks in its own
//! table, so a runner token never authenticates as a user, nor a user token as a runner.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::store::{Store, StoreError, StoreResult};

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

const RUNNER_PREFIX: &str = "urt_";
/// Longest runner name.
pub const MAX_RUNNER_NAME: usize = 64;

/// Why a runner token could not be created.
#[derive(Debug, thiserror::Error)]
pub enum RunnerTokenError {
    #[error(
        "invalid runner name {0:?}: use 1 to {MAX_RUNNER_NAME} characters of A-Z, a-z, 0-9, '.', '_' and '-'"
    )]
    InvalidName(String),
    #[error("a runner named {0} exists already; revoke its token first to mint a new one")]
    Exists(String),
    #[error(transparent)]
    Store(StoreError),
}

/// A runner the server accepted: the name its token was minted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerIdentity {
    pub name: String,
}

/// Whether `name` can name a runner: 1 to [`MAX_RUNNER_NAME`] characters of `[A-Za-z0-9._-]`.
pub fn is_valid_runner_name(name: &str) -> bool {
    (1..=MAX_RUNNER_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// What is stored of a runner token: the hex SHA-256 of the whole token.
fn runner_token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The secret of a well-formed runner token (64 lowercase hex characters after the prefix).
fn runner_secret(token: &str) -> Option<&str> {
    let secret = token.strip_prefix(RUNNER_PREFIX)?;
    let ok = secret.len() == 64
        && secret
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then_some(secret)
}

/// Mint a token for a new runner named `name` and store its hash; returns the token, to be
/// shown once.
pub async fn create_runner_token(
    store: &dyn Store,
    name: &str,
) -> Result<String, RunnerTokenError> {
    if !is_valid_runner_name(name) {
        return Err(RunnerTokenError::InvalidName(name.to_owned()));
    }
    let token = format!("{RUNNER_PREFIX}{}", random_hex(2));
    let hash = runner_token_hash(&token);
    match store
        .add_runner_token(name, &hash, crate::store::now_ms())
        .await
    {
        Ok(()) => Ok(token),
        Err(StoreError::AlreadyExists(_)) => Err(RunnerTokenError::Exists(name.to_owned())),
        Err(e) => Err(RunnerTokenError::Store(e)),
    }
}

/// Resolve a bearer token to the runner it was minted for, or `None` when it is not a valid
/// runner token (a user's token included).
pub async fn verify_runner(store: &dyn Store, token: &str) -> StoreResult<Option<RunnerIdentity>> {
    if runner_secret(token).is_none() {
        return Ok(None);
    }
    let name = store
        .runner_by_token_hash(&runner_token_hash(token))
        .await?;
    Ok(name.map(|name| RunnerIdentity { name }))
}

/// Whether `token` is spelled as a runner token (not whether it is valid).
pub fn is_runner_token(token: &str) -> bool {
    token.starts_with(RUNNER_PREFIX)
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

    #[test]
    fn runner_names_are_checked() {
        let long = "r".repeat(MAX_RUNNER_NAME);
        let too_long = "r".repeat(MAX_RUNNER_NAME + 1);
        let cases = [
            ("runner-1", true),
            ("eu.west_2-a", true),
            ("A", true),
            (long.as_str(), true),
            ("", false),
            (too_long.as_str(), false),
            ("has space", false),
            ("slash/y", false),
            ("colon:x", false),
            ("ünïcode", false),
            ("tab\t", false),
        ];
        for (name, valid) in cases {
            assert_eq!(is_valid_runner_name(name), valid, "{name:?}");
        }
    }

    #[test]
    fn runner_tokens_are_spelled_apart_from_user_tokens() {
        let user = mint().token;
        let secret = random_hex(2);
        let runner = format!("{RUNNER_PREFIX}{secret}");
        assert_eq!(runner_secret(&runner), Some(secret.as_str()));
        assert_eq!(
            parse(&runner),
            None,
            "a runner token never parses as a user's"
        );
        assert_eq!(
            runner_secret(&user),
            None,
            "a user token never parses as a runner's"
        );
        let upper = format!("{RUNNER_PREFIX}{}", secret.to_uppercase());
        let short = format!("{RUNNER_PREFIX}{}", &secret[1..]);
        for bad in [
            "",
            "urt_",
            "urt_xyz",
            upper.as_str(),
            short.as_str(),
            &secret,
        ] {
            assert_eq!(runner_secret(bad), None, "{bad:?}");
        }
    }

    async fn sqlite() -> (std::sync::Arc<dyn Store>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("auth.db").display());
        let store = crate::store::connect(&url).await.expect("connect");
        store.migrate().await.expect("migrate");
        (store, dir)
    }

    #[tokio::test]
    async fn runner_and_user_tokens_never_stand_in_for_each_other() {
        let (store, _dir) = sqlite().await;
        let store = store.as_ref();
        // A user and a runner of the same name: still two separate identities.
        let user_token = create_user_with_token(store, "ada").await.expect("user");
        let runner_token = create_runner_token(store, "ada").await.expect("runner");
        assert!(runner_token.starts_with(RUNNER_PREFIX) && is_runner_token(&runner_token));
        assert!(!is_runner_token(&user_token));

        let runner = verify_runner(store, &runner_token).await.expect("verify");
        assert_eq!(runner.map(|r| r.name).as_deref(), Some("ada"));
        let user = verify(store, &user_token).await.expect("verify");
        assert_eq!(user.map(|u| u.name).as_deref(), Some("ada"));

        assert_eq!(verify(store, &runner_token).await.expect("verify"), None);
        assert_eq!(
            verify_runner(store, &user_token).await.expect("verify"),
            None
        );
        // The stored hash itself is no token.
        let hash = runner_token_hash(&runner_token);
        assert_eq!(verify_runner(store, &hash).await.expect("verify"), None);
        let other = format!("{RUNNER_PREFIX}{}", random_hex(2));
        assert_eq!(verify_runner(store, &other).await.expect("verify"), None);
    }

    #[tokio::test]
    async fn runner_tokens_are_minted_once_per_name_and_revoked() {
        let (store, _dir) = sqlite().await;
        let store = store.as_ref();
        let first = create_runner_token(store, "r1").await.expect("mint");
        let again = create_runner_token(store, "r1").await;
        assert!(
            matches!(&again, Err(RunnerTokenError::Exists(name)) if name == "r1"),
            "{again:?}"
        );
        let bad = create_runner_token(store, "r 1").await;
        assert!(
            matches!(bad, Err(RunnerTokenError::InvalidName(_))),
            "{bad:?}"
        );
        assert!(store.revoke_runner_token("r1").await.expect("revoke"));
        assert_eq!(verify_runner(store, &first).await.expect("verify"), None);
        let second = create_runner_token(store, "r1").await.expect("mint again");
        assert_ne!(first, second);
        let runner = verify_runner(store, &second).await.expect("verify");
        assert_eq!(runner.map(|r| r.name).as_deref(), Some("r1"));
    }
}
