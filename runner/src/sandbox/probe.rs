//! The bubblewrap probe: the agent binary's `--version`, inside a real sandbox.

use std::path::Path;

use tokio::io::AsyncReadExt;

use super::{SandboxLimits, SandboxRequest, bwrap};

/// Whether bwrap can start the agent here; the reason when it cannot.
pub(super) async fn bwrap(agent_binary: &Path) -> Result<(), String> {
    if !agent_binary.is_file() {
        return Err(format!(
            "agent binary {} not found (set ULTRAPLAN_AGENT_BIN)",
            agent_binary.display()
        ));
    }
    let req = SandboxRequest {
        session_id: "probe".to_owned(),
        workspace: std::env::temp_dir(),
        writable: false,
        agent_binary: agent_binary.to_path_buf(),
        limits: SandboxLimits::default(),
        log_filter: "warn".to_owned(),
        environment: None,
        purpose: Default::default(),
        base_image: None,
        agent_egress: None,
    };
    let process = bwrap::spawn_with_args(&req, &["--version"]).map_err(|e| e.to_string())?;
    let (stdin, _stdout, mut stderr, mut control) =
        process.into_parts().ok_or("the probe has no stdio")?;
    drop(stdin);
    let mut text = String::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        stderr.read_to_string(&mut text),
    )
    .await;
    if read.is_err() {
        control.start_kill();
    }
    match control.wait().await {
        Some(exit) if exit.success => Ok(()),
        Some(exit) => Err(format!("{}: {}", exit.description, text.trim())),
        None => Err(format!("the probe could not be waited on: {}", text.trim())),
    }
}
