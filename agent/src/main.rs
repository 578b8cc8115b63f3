//! `ultraplan-agent`: the in-container plan-mode agent. The runtime lands with the agent issue;
//! until then the binary only answers `--version` and refuses to run.

fn main() -> anyhow::Result<()> {
    let arg = std::env::args().nth(1);
    if arg.as_deref() == Some("--version") {
        eprintln!("ultraplan-agent {}", env!("CARGO_PKG_VERSION"));
        return Ok(());
    }
    anyhow::bail!("the agent runtime is not built into this binary yet")
}
