//! `env set NAME --file F` / `env list` / `env rm NAME`: named environments kept on the
//! server (docs/ARCHITECTURE.md §6.5), used with `ultraplan launch --env NAME` instead of the
//! repository's `.ultraplan/environment.toml`. The server checks a definition exactly as it
//! reads a repository's file and says what to change.

use std::process::ExitCode;

use anyhow::{Context, bail};
use ultraplan::sanitize;
use ultraplan_protocol::environments::{EnvironmentInfo, MAX_ENVIRONMENT_DEFINITION_BYTES};

use super::Env;
use crate::cli::EnvAction;

/// The `env` command.
pub async fn command(env: &Env, action: EnvAction) -> anyhow::Result<ExitCode> {
    let (client, _) = env.client()?;
    match action {
        EnvAction::Set { name, file } => {
            let definition = read_definition(&file)?;
            client.set_environment(&name, definition).await?;
            eprintln!(
                "Set environment {}. Use it with `ultraplan launch --env {}`.",
                sanitize::line(&name),
                sanitize::line(&name)
            );
        }
        EnvAction::List { json } => {
            let list = client.environments().await?;
            if json {
                println!("{}", sanitize::json(&serde_json::to_string(&list)?));
            } else {
                print_table(&list.environments);
            }
        }
        EnvAction::Rm { name } => {
            client.delete_environment(&name).await?;
            eprintln!("Deleted environment {}.", sanitize::line(&name));
        }
    }
    Ok(ExitCode::SUCCESS)
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

fn print_table(environments: &[EnvironmentInfo]) {
    if environments.is_empty() {
        eprintln!("No environments. Set one with `ultraplan env set NAME --file FILE`.");
        return;
    }
    println!("{:<32} {:<8} UPDATED", "ENVIRONMENT", "SHARED");
    for environment in environments {
        let shared = if environment.shared { "yes" } else { "no" };
        let name = sanitize::line(&environment.name);
        let updated = sanitize::line(&environment.updated_at);
        println!("{name:<32} {shared:<8} {updated}");
    }
}
