//! `ultraplan-server secret …` (part of the binary, not the library): a user's secrets for
//! environment setup (docs/ARCHITECTURE.md §6.5), set from stdin so a value never appears on a
//! command line or in a shell history, listed by name, deleted. Values are never printed.

use std::io::Read as _;
use std::sync::Arc;

use anyhow::{Context, bail};
use ultraplan_protocol::secrets::MAX_SECRET_VALUE_BYTES;
use ultraplan_server::config::Config;
use ultraplan_server::secrets::{KeyFile, Secrets};
use ultraplan_server::store::Store;

use super::SecretCommand;

pub async fn run(config: &Config, command: SecretCommand) -> anyhow::Result<()> {
    let store = super::open_store(config).await?;
    let key = Arc::new(KeyFile::new(config.secrets_key_file.clone()));
    let secrets = Secrets::new(store.clone(), key);
    let store = store.as_ref();
    match command {
        SecretCommand::Set { user, name } => {
            let owner = user_id(store, &user).await?;
            let value = read_value(std::io::stdin().lock())?;
            secrets.set(&owner, &name, &value).await?;
            eprintln!("Set secret {name} for {user}.");
        }
        SecretCommand::List { user } => list(&secrets, &user_id(store, &user).await?).await?,
        SecretCommand::Rm { user, name } => {
            let owner = user_id(store, &user).await?;
            secrets.delete(&owner, &name).await?;
            eprintln!("Deleted secret {name} of {user}.");
        }
        SecretCommand::RotateKey { new_key_file } => {
            rotate(store, &config.secrets_key_file, new_key_file).await?;
        }
    }
    Ok(())
}

async fn rotate(
    store: &dyn Store,
    old_path: &std::path::Path,
    new_path: std::path::PathBuf,
) -> anyhow::Result<()> {
    let same = match (old_path.canonicalize(), new_path.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => old_path == new_path,
    };
    if same {
        bail!("the new key file is the one in use; name another file");
    }
    let old = KeyFile::new(old_path.to_path_buf());
    let new = KeyFile::new(new_path.clone());
    let rotation = ultraplan_server::secrets::rotate_key(store, &old, &new).await?;
    eprintln!(
        "Re-sealed {} secret(s) under {} ({} already were).",
        rotation.resealed,
        new_path.display(),
        rotation.already
    );
    if !rotation.unreadable.is_empty() {
        bail!(
            "neither key opens these secrets, left as they are: {}",
            rotation.unreadable.join(", ")
        );
    }
    eprintln!(
        "Now point every replica's --secrets-key-file (ULTRAPLAN_SECRETS_KEY_FILE) at {} and \
         restart them, then run this again to pick up values set under the old key meanwhile.",
        new_path.display()
    );
    Ok(())
}

async fn user_id(store: &dyn Store, name: &str) -> anyhow::Result<String> {
    let user = store.user_by_name(name).await?;
    user.map(|u| u.id)
        .with_context(|| format!("no user named {name}"))
}

#[allow(clippy::print_stdout)]
async fn list(secrets: &Secrets, owner: &str) -> anyhow::Result<()> {
    println!("{:<32} UPDATED", "SECRET");
    for secret in secrets.list(owner).await? {
        println!("{:<32} {}", secret.name, secret.updated_at);
    }
    Ok(())
}

/// The value on `input`: UTF-8, one trailing newline (`\n` or `\r\n`) dropped. Reading stops
/// just past the size limit, so a huge input is refused without being held.
fn read_value(input: impl std::io::Read) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_SECRET_VALUE_BYTES + 3).unwrap_or(u64::MAX);
    input
        .take(limit)
        .read_to_end(&mut bytes)
        .context("reading the value from stdin")?;
    let Ok(mut value) = String::from_utf8(bytes) else {
        bail!("the value on stdin is not UTF-8 text");
    };
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_dropped() {
        let cases: [(&[u8], &str); 6] = [
            (b"tok", "tok"),
            (b"tok\n", "tok"),
            (b"tok\r\n", "tok"),
            (b"tok\n\n", "tok\n"),
            (b"a\nb\n", "a\nb"),
            (b"", ""),
        ];
        for (input, want) in cases {
            assert_eq!(read_value(input).expect("read"), want);
        }
        assert!(read_value(&b"\xff"[..]).is_err());
        let huge = vec![b'x'; MAX_SECRET_VALUE_BYTES * 4];
        let read = read_value(huge.as_slice()).expect("read");
        assert_eq!(read.len(), MAX_SECRET_VALUE_BYTES + 3);
    }
}
