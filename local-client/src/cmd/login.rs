//! `ultraplan login --server URL --token TOKEN`: check the token, then save both (mode 0600).

use std::process::ExitCode;

use anyhow::{Context, bail};
use ultraplan::api::Client;
use ultraplan::config::{self, FileConfig};
use ultraplan_protocol::api::ReasonCode;

use crate::cli::GlobalArgs;

/// The `login` command.
pub async fn command(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let (Some(server), Some(token)) = (&global.server, &global.token) else {
        bail!(
            "login needs --server URL and --token TOKEN (`ultraplan-server user add NAME` prints a token)"
        );
    };
    let server = config::normalize_server(server)?;
    let token = token.trim();
    let client = Client::new(&server, Some(token))?;
    match client.eligibility().await {
        Ok(e) if e.reasons.iter().any(|r| r.code == ReasonCode::NotLoggedIn) => {
            bail!("the server at {server} does not accept this token")
        }
        Ok(_) => {}
        Err(e) => eprintln!("ultraplan: could not check the token ({e}); saving it anyway"),
    }
    let path = ultraplan::paths::config_file()?;
    let mut file = config::load_file(&path)?;
    file = FileConfig {
        server: Some(server.clone()),
        token: Some(token.to_owned()),
        ..file
    };
    config::save_file(&path, &file).with_context(|| format!("saving {}", path.display()))?;
    println!(
        "Logged in to {server}; settings saved to {}",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
