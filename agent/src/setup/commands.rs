//! The Python virtual environment and the setup commands (docs/ARCHITECTURE.md §6.5).

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

use ultraplan_protocol::environment::SETUP_INTERNAL_ERROR;

use super::SetupError;
use super::env::{SetupPaths, base_env, find_program};

/// Create `<env>/venv` over the system's packages when `python3` is on the commands' `PATH`
/// and there is none yet, and say so on `out`. A failure is reported on `out`, not fatal.
pub(super) fn ensure_venv<W: Write>(paths: &SetupPaths, out: &mut W) -> Result<(), SetupError> {
    let venv = paths.venv();
    if std::fs::symlink_metadata(&venv).is_ok() {
        return Ok(());
    }
    let Some(python) = find_program(&paths.search_path(), "python3") else {
        return Ok(());
    };
    let result = Command::new(&python)
        .args(["-m", "venv", "--system-site-packages", "--without-pip"])
        .arg(&venv)
        .env_clear()
        .envs(base_env(paths, false, false))
        .stdin(Stdio::null())
        .output();
    let line = match result {
        Ok(output) if output.status.success() => {
            pip_shims(&venv);
            format!(
                "created the Python virtual environment {} over the system's packages \
                 (`pip install …` and `python3 -m pip install …` install into it)",
                venv.display()
            )
        }
        Ok(output) => format!(
            "could not create the Python virtual environment {}: {}",
            venv.display(),
            failure_reason(&output.stderr, output.status)
        ),
        Err(e) => format!("could not run {}: {e}", python.display()),
    };
    writeln!(out, "{line}").map_err(SetupError::Output)?;
    out.flush().map_err(SetupError::Output)
}

/// `pip` and `pip3` in the venv's `bin`: a venv made `--without-pip` has none, so a bare
/// `pip` would be the system's, which refuses to install (PEP 668). Each runs the system's pip
/// module with the venv's Python, which installs into the venv.
fn pip_shims(venv: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let script = "#!/bin/sh\nexec \"$(dirname \"$0\")/python3\" -m pip \"$@\"\n";
    for name in ["pip", "pip3"] {
        let path = venv.join("bin").join(name);
        let written = std::fs::write(&path, script)
            .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)));
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "cannot write a pip shim");
        }
    }
}

/// The last line the failed command wrote on stderr, or its status.
fn failure_reason(stderr: &[u8], status: ExitStatus) -> String {
    let text = String::from_utf8_lossy(stderr);
    match text.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(line) => line.trim().to_owned(),
        None => status.to_string(),
    }
}

/// Run the commands in order until one fails; its exit status, or 0.
pub(super) fn run_all<W: Write + AsFd>(
    commands: &[String],
    workspace: &Path,
    env: &[(String, String)],
    out: &mut W,
) -> Result<u8, SetupError> {
    for (index, command) in commands.iter().enumerate() {
        let code = run_one(command, workspace, env, out)?;
        if code != 0 {
            tracing::info!(index, code, "setup command failed");
            return Ok(code);
        }
    }
    Ok(0)
}

fn run_one<W: Write + AsFd>(
    command: &str,
    workspace: &Path,
    env: &[(String, String)],
    out: &mut W,
) -> Result<u8, SetupError> {
    writeln!(out, "$ {command}").map_err(SetupError::Output)?;
    out.flush().map_err(SetupError::Output)?;
    // The command's stdout and stderr are both our stdout: one pipe, lines in order.
    let stdout = out
        .as_fd()
        .try_clone_to_owned()
        .map_err(SetupError::Output)?;
    let stderr = stdout.try_clone().map_err(SetupError::Output)?;
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(command)
        .current_dir(workspace)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .status()
        .map_err(|source| SetupError::Spawn {
            workspace: workspace.to_owned(),
            source,
        })?;
    Ok(exit_code(status))
}

/// The status a command's end maps to: its exit code, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(SETUP_INTERNAL_ERROR),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(u8::MAX),
        (None, None) => SETUP_INTERNAL_ERROR,
    }
}
