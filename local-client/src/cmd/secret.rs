//! `secret set NAME` / `secret list` / `secret rm NAME`: the secrets the server gives your
//! environments' setup phase as environment variables (docs/ARCHITECTURE.md §6.5). A value is
//! read from stdin when it is not a terminal, else typed at a prompt that does not echo; it is
//! never printed, and the server never sends it back.

use std::io::{IsTerminal as _, Read as _};
use std::process::ExitCode;

use anyhow::{Context, bail};
use dialoguer::console::Term;
use dialoguer::theme::ColorfulTheme;
use ultraplan::sanitize;
use ultraplan_protocol::secrets::MAX_SECRET_VALUE_BYTES;

use super::Env;
use crate::cli::SecretAction;

/// The `secret` command.
pub async fn command(env: &Env, action: SecretAction) -> anyhow::Result<ExitCode> {
    let (client, _) = env.client()?;
    match action {
        SecretAction::Set { name } => {
            let value = read_value(&name)?;
            client.set_secret(&name, value).await?;
            eprintln!("Set secret {}.", sanitize::line(&name));
        }
        SecretAction::List { json } => {
            let list = client.secrets().await?;
            if json {
                println!("{}", sanitize::json(&serde_json::to_string(&list)?));
            } else {
                print_table(&list.secrets);
            }
        }
        SecretAction::Rm { name } => {
            client.delete_secret(&name).await?;
            eprintln!("Deleted secret {}.", sanitize::line(&name));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(secrets: &[ultraplan_protocol::secrets::SecretInfo]) {
    if secrets.is_empty() {
        eprintln!("No secrets. Set one with `ultraplan secret set NAME`.");
        return;
    }
    println!("{:<32} UPDATED", "SECRET");
    for secret in secrets {
        let name = sanitize::line(&secret.name);
        println!("{name:<32} {}", sanitize::line(&secret.updated_at));
    }
}

/// The value: typed without echo at a terminal, else all of stdin with one trailing newline
/// dropped.
fn read_value(name: &str) -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        return dialoguer::Password::with_theme(&ColorfulTheme::default())
            .with_prompt(format!("Value of {}", sanitize::line(name)))
            .report(false)
            .interact_on(&Term::stderr())
            .context("reading the value");
    }
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_SECRET_VALUE_BYTES + 3).unwrap_or(u64::MAX);
    std::io::stdin()
        .lock()
        .take(limit)
        .read_to_end(&mut bytes)
        .context("reading the value from stdin")?;
    let Ok(value) = String::from_utf8(bytes) else {
        bail!("the value on stdin is not UTF-8 text");
    };
    Ok(trim_one_newline(value))
}

/// `value` without one trailing `\n` or `\r\n` (what `echo` and editors add).
fn trim_one_newline(mut value: String) -> String {
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    value
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_trailing_newline_is_dropped() {
        let cases = [
            ("tok", "tok"),
            ("tok\n", "tok"),
            ("tok\r\n", "tok"),
            ("tok\n\n", "tok\n"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(super::trim_one_newline(input.to_owned()), want);
        }
    }
}
