//! The thin layer that runs git: one repository directory, `-c core.quotepath=off` so paths come
//! back as bytes to parse, and otherwise the user's own configuration.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Why a git command could not do its job.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git is not installed, or could not be started.
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// git ran and failed.
    #[error("`git {command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    /// A check before git would write refused it.
    #[error("refused before applying: {0}")]
    Refused(String),
}

/// What a git command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub success: bool,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Output {
    /// stdout as text, without the final newline.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout)
            .trim_end_matches('\n')
            .to_owned()
    }
}

/// git, run in one directory.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
}

impl Git {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory git runs in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        cmd.args(["-c", "core.quotepath=off", "-C"])
            .arg(&self.dir)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Runs `git ARGS`; a failing exit is an [`Output`], not an error.
    pub fn run(&self, args: &[&str]) -> Result<Output, GitError> {
        let out = self.command(args).output().map_err(GitError::Spawn)?;
        Ok(output(out))
    }

    /// Runs `git ARGS` with `input` on stdin.
    pub fn run_with_input(&self, args: &[&str], input: &[u8]) -> Result<Output, GitError> {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(GitError::Spawn)?;
        let stdin = child.stdin.take();
        let out = std::thread::scope(|scope| {
            // Written from a thread so a large patch cannot deadlock against git's output.
            scope.spawn(|| {
                if let Some(mut stdin) = stdin {
                    // git may stop reading early (and report why); its answer says so.
                    let _ = stdin.write_all(input);
                }
            });
            child.wait_with_output()
        })
        .map_err(GitError::Spawn)?;
        Ok(output(out))
    }

    /// Runs `git ARGS` and fails unless it succeeds; stdout as text.
    pub fn ok(&self, args: &[&str]) -> Result<String, GitError> {
        let out = self.run(args)?;
        checked(args, out).map(|o| o.text())
    }

    /// Runs `git ARGS` and fails unless it succeeds; stdout as bytes.
    pub fn ok_bytes(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let out = self.run(args)?;
        checked(args, out).map(|o| o.stdout)
    }

    /// [`Git::ok`] with `input` on stdin.
    pub fn ok_with_input(&self, args: &[&str], input: &[u8]) -> Result<String, GitError> {
        let out = self.run_with_input(args, input)?;
        checked(args, out).map(|o| o.text())
    }
}

fn output(out: std::process::Output) -> Output {
    Output {
        success: out.status.success(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).trim_end().to_owned(),
    }
}

fn checked(args: &[&str], out: Output) -> Result<Output, GitError> {
    if out.success {
        Ok(out)
    } else {
        Err(GitError::Failed {
            command: args.join(" "),
            stderr: if out.stderr.is_empty() {
                "no message".to_owned()
            } else {
                out.stderr
            },
        })
    }
}
