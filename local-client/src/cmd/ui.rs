//! Talking to the person at the terminal: confirmations, choices, progress. Nothing here ever
//! blocks without a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use dialoguer::console::Term;
use dialoguer::theme::ColorfulTheme;
use indicatif::{ProgressBar, ProgressStyle};

/// Whether a person can answer: stdin and stderr are terminals.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks a question with the given choices on stderr; `None` when dismissed (Esc, q).
pub fn choose(question: &str, items: &[&str]) -> anyhow::Result<Option<usize>> {
    dialoguer::Select::with_theme(&ColorfulTheme::default())
        .with_prompt(question)
        .items(items.iter().copied())
        .default(0)
        .interact_on_opt(&Term::stderr())
        .context("reading your answer")
}

/// "Run ultraplan on <server>?" — true for "Run ultraplan".
pub fn confirm_launch(server: &str) -> anyhow::Result<bool> {
    let question = format!("Run ultraplan on {server}?");
    Ok(choose(&question, &["Run ultraplan", "Not now"])? == Some(0))
}

/// A yes/no question, `no` by default.
pub fn confirm(question: &str) -> anyhow::Result<bool> {
    dialoguer::Confirm::with_theme(&ColorfulTheme::default())
        .with_prompt(question)
        .default(false)
        .interact_on_opt(&Term::stderr())
        .map(|answer| answer == Some(true))
        .context("reading your answer")
}

/// A spinner on stderr when it is a terminal (hidden otherwise, and when `quiet`).
pub fn spinner(message: &str, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner().with_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// A byte progress bar on stderr when it is a terminal.
pub fn bytes_bar(len: u64, message: &str, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(len)
        .with_style(style)
        .with_message(message.to_owned())
}

/// Prints a note on stderr unless `quiet`.
pub fn note(quiet: bool, message: &str) {
    if !quiet {
        eprintln!("{message}");
    }
}

/// Opens a URL in the browser: `$BROWSER` when set, else `xdg-open` when on PATH. Returns
/// whether a browser was started.
pub fn open_browser(url: &str) -> bool {
    let program = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| ultraplan::paths::which("xdg-open"));
    let Some(program) = program else {
        return false;
    };
    let spawned = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
            true
        }
        Err(e) => {
            tracing::warn!("cannot open the browser: {e}");
            false
        }
    }
}
