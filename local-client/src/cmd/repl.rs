//! `ultraplan` with no arguments: the interactive prompt. Keyword triggers are painted in a
//! rainbow as you type, a notice says the prompt will launch, a confirmation comes on submit,
//! the launch runs in the background (one at a time), and a status line tracks the session.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reedline::{ExternalPrinter, Reedline, Signal};
use time::OffsetDateTime;
use tokio::runtime::Runtime;
use ultraplan::config::{LOCAL_COMMAND_ENV, Settings};
use ultraplan::keyword;
use ultraplan::pill;
use ultraplan::repl::{LaunchGuard, NoticeHinter, RainbowHighlighter, UltraplanPrompt};

use super::launch::{self, Request};
use super::{Env, pending, ui};

/// How often the background monitor reads the session's state file.
const MONITOR_EVERY: Duration = Duration::from_secs(1);

/// How a background launch ended: the session id, or the error.
type LaunchDone = Result<String, String>;

/// The prompt's state between lines.
struct Repl {
    env: Arc<Env>,
    settings: Settings,
    guard: LaunchGuard,
    /// The session the status line follows (shared with the monitor).
    current: Arc<Mutex<Option<String>>>,
    done_tx: Sender<LaunchDone>,
    done_rx: Receiver<LaunchDone>,
    printer: SyncSender<String>,
    /// Teleported plans already offered in this run.
    offered: HashSet<String>,
}

/// Runs the interactive prompt until Ctrl-D.
pub fn run(env: Env, rt: &Runtime) -> anyhow::Result<ExitCode> {
    if !ui::interactive() {
        eprintln!(
            "ultraplan: the interactive prompt needs a terminal; pass what to plan instead: \
             ultraplan \"<prompt>\""
        );
        return Ok(ExitCode::from(2));
    }
    let settings = env.settings()?;
    let printer = ExternalPrinter::<String>::new(64);
    let sender = printer.sender();
    let mut editor = Reedline::create()
        .with_highlighter(Box::new(RainbowHighlighter))
        .with_hinter(Box::new(NoticeHinter::new(&settings.server)))
        .with_external_printer(printer);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut repl = Repl {
        current: Arc::new(Mutex::new(None)),
        guard: LaunchGuard::default(),
        printer: sender,
        env: Arc::new(env),
        settings,
        done_tx,
        done_rx,
        offered: HashSet::new(),
    };
    repl.resume_latest();
    rt.spawn(monitor(
        repl.env.clone(),
        repl.current.clone(),
        repl.printer.clone(),
    ));
    println!(
        "ultraplan on {} — put the word ultraplan in a prompt to plan it remotely. Ctrl-D quits.",
        repl.settings.server
    );
    loop {
        repl.between_prompts(rt);
        match editor.read_line(&UltraplanPrompt) {
            Ok(Signal::Success(line)) => repl.submit(&line, rt)?,
            Ok(Signal::CtrlD) => break,
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(ExitCode::SUCCESS)
}

impl Repl {
    /// Follows the newest session whose watch still runs, if any.
    fn resume_latest(&mut self) {
        if let Some(state) = self.env.store.latest().filter(|s| !s.is_final()) {
            if state.watcher_alive() {
                self.guard.launched(&state.session_id);
            }
            self.set_current(Some(state.session_id));
        }
    }

    fn set_current(&self, id: Option<String>) {
        if let Ok(mut current) = self.current.lock() {
            *current = id;
        }
    }

    fn current_state(&self) -> Option<ultraplan::state::SessionState> {
        let id = self.current.lock().ok()?.clone()?;
        self.env.store.load(&id).ok().flatten()
    }

    /// Settles finished launches, offers teleported plans, prints the status line.
    fn between_prompts(&mut self, rt: &Runtime) {
        self.drain_launches();
        let state = self.current_state();
        self.guard.refresh(state.as_ref());
        for waiting in ultraplan::teleport::waiting(&self.env.store) {
            if self.offered.insert(waiting.session_id.clone())
                && let Err(e) = rt.block_on(pending::offer(&self.env, &waiting))
            {
                eprintln!(
                    "ultraplan: {}",
                    ultraplan::sanitize::text(&format!("{e:#}"))
                );
            }
        }
        if self.guard.is_launching() {
            println!("◇ ultraplan launching…");
        } else if let Some(state) = state {
            let line = pill::status_line(&state, OffsetDateTime::now_utc());
            println!("{}", ultraplan::sanitize::line(&line));
        }
    }

    fn drain_launches(&mut self) {
        while let Ok(done) = self.done_rx.try_recv() {
            match done {
                Ok(id) => {
                    self.guard.launched(&id);
                    self.set_current(Some(id));
                }
                Err(_) => self.guard.launch_failed(),
            }
        }
    }

    /// Handles one submitted line.
    fn submit(&mut self, line: &str, rt: &Runtime) -> anyhow::Result<()> {
        self.drain_launches();
        if line.trim().is_empty() {
            return Ok(());
        }
        if !keyword::detect(line).triggered() {
            self.not_ultraplan(line);
            return Ok(());
        }
        let Some(prompt) = launch::prompt_to_send(line) else {
            println!("Say what to plan, e.g. \"ultraplan fix the flaky login test\".");
            return Ok(());
        };
        let refreshed = self.current_state();
        self.guard.refresh(refreshed.as_ref());
        if let Err(busy) = self.guard.try_begin() {
            println!("{}", ultraplan::sanitize::line(&busy.message()));
            return Ok(());
        }
        if !ui::confirm_launch(&self.settings.server).unwrap_or(false) {
            self.guard.launch_failed();
            println!("Not launched.");
            return Ok(());
        }
        self.spawn_launch(prompt, rt);
        Ok(())
    }

    fn spawn_launch(&self, prompt: String, rt: &Runtime) {
        let env = self.env.clone();
        let done = self.done_tx.clone();
        let printer = self.printer.clone();
        rt.spawn(async move {
            let result = launch_in_background(&env, prompt).await;
            let (message, outcome) = match result {
                Ok((id, url)) => (
                    format!(
                        "◇ ultraplan launched; review the plan at {}",
                        ultraplan::sanitize::line(&url)
                    ),
                    Ok(id),
                ),
                Err(e) => (
                    format!(
                        "ultraplan: launch failed: {}",
                        ultraplan::sanitize::text(&format!("{e:#}"))
                    ),
                    Err(e.to_string()),
                ),
            };
            let _ = done.send(outcome);
            let _ = printer.try_send(message);
        });
    }

    /// A prompt without the keyword: the local command, or a one-line explanation.
    fn not_ultraplan(&self, line: &str) {
        let Some(command) = ultraplan::config::local_command_from_env() else {
            println!(
                "No ultraplan keyword in that prompt: include the word ultraplan to plan it \
                 remotely (set {LOCAL_COMMAND_ENV} to send other prompts to a local command)."
            );
            return;
        };
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{command} \"$@\""))
            .arg("ultraplan")
            .arg(line)
            .status();
        if let Err(e) = status {
            eprintln!("ultraplan: could not run `{command}`: {e}");
        }
    }
}

async fn launch_in_background(env: &Env, prompt: String) -> anyhow::Result<(String, String)> {
    let (client, settings) = env.client()?;
    let eligibility = launch::check_eligible(&client, &settings).await?;
    let request = Request {
        prompt,
        draft_plan: None,
        environment: None,
        repo: ".".into(),
        watch: !super::no_watch(),
        quiet: true,
        codec: ultraplan::bundle::Codec::negotiate(&eligibility.accepts_bundle_encodings),
        resumable: eligibility.resumable_bundle_uploads,
        max_bundle_bytes: eligibility.max_bundle_bytes,
        incremental: eligibility.incremental_bundles,
    };
    let launched = launch::run(env, &client, &settings, &request).await?;
    Ok((launched.session.id, launched.session.url))
}

/// Prints the status line whenever the current session's pill changes.
async fn monitor(env: Arc<Env>, current: Arc<Mutex<Option<String>>>, printer: SyncSender<String>) {
    let mut last: Option<(String, String)> = None;
    loop {
        tokio::time::sleep(MONITOR_EVERY).await;
        let id = current.lock().ok().and_then(|c| c.clone());
        let Some(state) = id.and_then(|id| env.store.load(&id).ok().flatten()) else {
            continue;
        };
        let key = (state.session_id.clone(), pill::pill(&state));
        let changed = last.as_ref().is_some_and(|l| *l != key);
        if changed {
            let line = pill::status_line(&state, OffsetDateTime::now_utc());
            let _ = printer.try_send(ultraplan::sanitize::line(&line));
        }
        last = Some(key);
    }
}
