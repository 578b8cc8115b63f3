//! `ultraplan-server env …` (part of the binary, not the library): named environments
//! (docs/ARCHITECTURE.md §6.5) for one user, or shared with every user. A definition is
//! checked exactly as a session would read it before it is stored.

use anyhow::{Context, bail};
use ultraplan_protocol::environments::{EnvironmentInfo, MAX_ENVIRONMENT_DEFINITION_BYTES};
use ultraplan_server::config::Config;
use ultraplan_server::environments::{Environments, Scope};
use ultraplan_server::store::Store;

use super::{EnvCommand, EnvOwner};

pub async fn run(config: &Config, command: EnvCommand) -> anyhow::Result<()> {
    let store = super::open_store(config).await?;
    let environments = Environments::new(store.clone());
    match command {
        EnvCommand::Add { name, file, owner } => {
            let definition = read_definition(&file)?;
            let owner_id = owner_id(store.as_ref(), &owner).await?;
            environments
                .set(scope(&owner_id), &name, &definition)
                .await?;
            eprintln!("Set environment {name} ({}).", describe(&owner));
        }
        EnvCommand::List { owner } => {
            let listed = match owner_id(store.as_ref(), &owner).await? {
                Some(id) => environments.list(&id).await?,
                None => environments.list_shared().await?,
            };
            print_list(&listed);
        }
        EnvCommand::Rm { name, owner } => {
            let owner_id = owner_id(store.as_ref(), &owner).await?;
            environments.delete(scope(&owner_id), &name).await?;
            eprintln!("Deleted environment {name} ({}).", describe(&owner));
        }
    }
    Ok(())
}

fn scope(owner_id: &Option<String>) -> Scope<'_> {
    match owner_id {
        Some(id) => Scope::Owner(id),
        None => Scope::Shared,
    }
}

fn describe(owner: &EnvOwner) -> String {
    match &owner.user {
        Some(user) => format!("user {user}"),
        None => "shared with every user".to_owned(),
    }
}

/// The user's id, or `None` for `--shared`.
async fn owner_id(store: &dyn Store, owner: &EnvOwner) -> anyhow::Result<Option<String>> {
    let Some(name) = &owner.user else {
        return Ok(None);
    };
    let user = store.user_by_name(name).await?;
    user.map(|u| Some(u.id))
        .with_context(|| format!("no user named {name}"))
}

fn read_definition(path: &std::path::Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() > MAX_ENVIRONMENT_DEFINITION_BYTES {
        bail!(
            "{} is larger than {MAX_ENVIRONMENT_DEFINITION_BYTES} bytes",
            path.display()
        );
    }
    String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8 text", path.display()))
}

#[allow(clippy::print_stdout)]
fn print_list(environments: &[EnvironmentInfo]) {
    println!("{:<32} {:<8} UPDATED", "ENVIRONMENT", "SHARED");
    for env in environments {
        let shared = if env.shared { "yes" } else { "no" };
        println!("{:<32} {shared:<8} {}", env.name, env.updated_at);
    }
}
