//! `ultraplan pull ID` for an approved plan: wait for the remote execution, download its patch,
//! check every file against this repository, then apply it here, in a fresh worktree, or
//! around a stash — and report each file.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use ultraplan::api::{ApiError, Client};
use ultraplan::patch::apply::{self as apply_mod, WorktreeError};
use ultraplan::patch::preflight::{self, Dirt, Verdict};
use ultraplan::patch::report::{self, Markers, Mode};
use ultraplan::patch::{FilePatch, Popped, Repo, RepoError, WorktreePlan, parse};
use ultraplan_protocol::constants::POLL_INTERVAL_SECS;
use ultraplan_protocol::patch::ExecutionState;
use ultraplan_protocol::session::SessionResource;

use super::super::{ui, watch};
use crate::cli::PullArgs;

/// Exit status of usage errors, as clap uses for bad arguments.
pub const USAGE: u8 = 2;

/// Consecutive transient failures tolerated while waiting.
const MAX_TRANSIENT: u32 = 5;

/// How to apply when the working tree cannot take the patch as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    Worktree,
    Stash,
    Cancel,
}

/// Everything known once the patch is checked.
struct Pulled<'a> {
    id: &'a str,
    args: &'a PullArgs,
    repo: Repo,
    files: Vec<FilePatch>,
    headline: String,
    /// The session's base commit, if it recorded one.
    base: Option<String>,
}

/// The patch flow: the repository first (a usage error without one), then the patch, then
/// the checks and the choice.
pub async fn command(client: &Client, args: &PullArgs) -> anyhow::Result<ExitCode> {
    let id = args.session.id.as_str();
    let repo = match Repo::discover(&args.repo) {
        Ok(repo) => repo,
        Err(e @ (RepoError::NotARepository { .. } | RepoError::NoSuchDirectory(_))) => {
            eprintln!(
                "ultraplan: {e}.\nThe patch of session {id} is applied to a git repository: run \
                 `ultraplan pull {id}` inside one, or pass -C PATH."
            );
            return Ok(ExitCode::from(USAGE));
        }
        Err(e) => return Err(anyhow!(e).context("finding the git repository")),
    };
    let Some((session, bytes)) = download(client, id, args.no_wait).await? else {
        eprintln!(
            "\nStopped waiting; nothing was changed. Run `ultraplan pull {id}` again once the \
             execution has finished."
        );
        return Ok(ExitCode::FAILURE);
    };
    let files = parse::split(&bytes).context("reading the patch")?;
    if files.is_empty() {
        println!("The remote execution changed nothing.");
        return Ok(ExitCode::SUCCESS);
    }
    let pulled = Pulled {
        id,
        args,
        headline: report::headline(id, &files, bytes.len()),
        base: session.session_context.base.commit.clone(),
        repo,
        files,
    };
    pulled.run()
}

impl Pulled<'_> {
    fn run(&self) -> anyhow::Result<ExitCode> {
        let verdicts = preflight::preflight(&self.repo.git, &self.files)
            .context("checking the patch against the working tree")?;
        let status = self.repo.status().context("reading `git status`")?;
        let dirt = preflight::dirt(&status, &self.files);
        let conflicts = verdicts.iter().any(Verdict::is_conflict);
        let wants_worktree = self.args.worktree || self.args.worktree_dir.is_some();
        let clean = dirt.is_clean() && !conflicts;

        if conflicts && let Some(note) = self.base_note() {
            eprintln!("{note}");
        }
        if self.args.dry_run {
            return self.dry_run(&verdicts, &dirt);
        }
        let (applies, _, _) = report::counts(&verdicts);
        if applies == 0 && !conflicts && !wants_worktree {
            self.print(&verdicts, Mode::Applied, &[]);
            println!("Nothing to apply: every file is already applied here. Nothing was changed.");
            return Ok(ExitCode::SUCCESS);
        }
        let choice = if wants_worktree {
            Choice::Worktree
        } else if clean {
            return self.apply_here(&verdicts);
        } else if self.args.stash {
            Choice::Stash
        } else if interactive() {
            self.print(&verdicts, Mode::Preview, &[]);
            println!(
                "It cannot go straight into the working tree: {}",
                why_not_here(&dirt, &verdicts)
            );
            self.ask(&dirt)?
        } else {
            self.print(&verdicts, Mode::Preview, &[]);
            println!(
                "Not applied: {} Nothing was changed.",
                why_not_here(&dirt, &verdicts)
            );
            println!("{}", self.options(&dirt));
            return Ok(ExitCode::FAILURE);
        };
        match choice {
            Choice::Worktree => self.in_worktree(),
            Choice::Stash => self.around_stash(&dirt),
            Choice::Cancel => {
                println!("Cancelled; nothing was changed.");
                Ok(ExitCode::FAILURE)
            }
        }
    }

    /// The headline and the per-file lines.
    fn print(&self, verdicts: &[Verdict], mode: Mode, markers: &[Markers]) {
        println!("{}", self.headline);
        print!(
            "{}",
            report::render(&report::lines(&self.files, verdicts, mode, markers))
        );
    }

    fn dry_run(&self, verdicts: &[Verdict], dirt: &Dirt) -> anyhow::Result<ExitCode> {
        self.print(verdicts, Mode::Preview, &[]);
        let conflicts = verdicts.iter().any(Verdict::is_conflict);
        let top = self.repo.top.display();
        println!("Dry run: nothing was changed.");
        let (applies, _, _) = report::counts(verdicts);
        let wants_worktree = self.args.worktree || self.args.worktree_dir.is_some();
        if applies == 0 && !conflicts && !wants_worktree {
            println!("Nothing to apply: every file is already applied here.");
        } else if wants_worktree {
            match self.worktree_plan() {
                Ok(plan) => println!(
                    "Without --dry-run it would be applied in a new worktree at {} on branch {} \
                     starting at {} (and checked there again first).",
                    plan.path.display(),
                    plan.branch,
                    describe_base(&plan, self.base.as_deref())
                ),
                Err(e) => println!("Without --dry-run no worktree could be made: {e}."),
            }
        } else if dirt.is_clean() && !conflicts {
            println!("Without --dry-run it would be applied to the working tree of {top}.");
        } else if self.args.stash {
            println!(
                "Without --dry-run your local changes would be stashed, the patch applied to \
                 {top}, and your changes popped back."
            );
        } else {
            println!(
                "Without --dry-run it would not be applied here: {}",
                why_not_here(dirt, verdicts)
            );
            println!("{}", self.options(dirt));
        }
        Ok(exit(conflicts))
    }

    /// Straight into the working tree (clean tree, no conflicts).
    fn apply_here(&self, verdicts: &[Verdict]) -> anyhow::Result<ExitCode> {
        apply_mod::apply(&self.repo.git, &self.files, verdicts)
            .context("applying the patch (nothing was changed)")?;
        self.print(verdicts, Mode::Applied, &[]);
        println!(
            "Applied to the working tree of {} (nothing committed or staged).",
            self.repo.top.display()
        );
        println!("Next: review with `git diff` (and `git status` for new files), then commit.");
        Ok(ExitCode::SUCCESS)
    }

    /// A hint when the session's base commit is unknown here: the wrong repository, or one
    /// not fetched lately.
    fn base_note(&self) -> Option<String> {
        let base = self.base.as_deref()?;
        if self.repo.commit(base).is_some() {
            return None;
        }
        Some(format!(
            "Note: the session's base commit {} is not in this repository; is it the right one \
             (or not fetched yet)?",
            base.chars().take(12).collect::<String>()
        ))
    }

    fn worktree_plan(&self) -> Result<WorktreePlan, WorktreeError> {
        apply_mod::plan_worktree(
            &self.repo,
            self.id,
            self.base.as_deref(),
            self.args.worktree_dir.as_deref(),
        )
    }

    /// A new branch in a fresh worktree at the session's base commit.
    fn in_worktree(&self) -> anyhow::Result<ExitCode> {
        let plan = match self.worktree_plan() {
            Ok(plan) => plan,
            Err(e) => {
                eprintln!("ultraplan: cannot make the worktree: {e}. Nothing was changed.");
                return Ok(ExitCode::FAILURE);
            }
        };
        let git = apply_mod::create_worktree(&self.repo, &plan).context("creating the worktree")?;
        let verdicts = preflight::preflight(&git, &self.files)
            .context("checking the patch against the new worktree")?;
        apply_mod::apply(&git, &self.files, &verdicts).with_context(|| {
            format!(
                "applying the patch in {} (the worktree is left as created)",
                plan.path.display()
            )
        })?;
        let conflicts = verdicts.iter().any(Verdict::is_conflict);
        let markers: Vec<Markers> = if conflicts {
            apply_mod::leave_conflicts(&git, &self.files, &verdicts)
                .into_iter()
                .map(|left| if left { Markers::Left } else { Markers::None })
                .collect()
        } else {
            Vec::new()
        };
        self.print(&verdicts, Mode::Applied, &markers);
        println!(
            "Applied in a new worktree at {}, on branch {} starting at {}. Nothing was \
             committed, and your working tree was not touched.",
            plan.path.display(),
            plan.branch,
            describe_base(&plan, self.base.as_deref())
        );
        if conflicts {
            println!(
                "Some files conflict: resolve them there (`git status` lists them), then commit."
            );
        }
        println!(
            "Next: cd {} && git status && git diff, then commit; merge it with `git merge {}` from your \
             branch, and remove the worktree with `git worktree remove {}`.",
            shell_quote(&plan.path),
            plan.branch,
            shell_quote(&plan.path)
        );
        Ok(exit(conflicts))
    }

    /// `git stash push --include-untracked`, apply, `git stash pop`.
    fn around_stash(&self, dirt: &Dirt) -> anyhow::Result<ExitCode> {
        let stashed = if dirt.is_clean() {
            false
        } else {
            apply_mod::stash_push(&self.repo, self.id)
                .context("stashing your changes (nothing was changed)")?
        };
        let checked = preflight::preflight(&self.repo.git, &self.files)
            .context("checking the patch after stashing");
        let verdicts = match checked {
            Ok(v) => v,
            Err(e) => {
                self.restore(stashed);
                return Err(e);
            }
        };
        if verdicts.iter().any(Verdict::is_conflict) {
            self.restore(stashed);
            self.print(&verdicts, Mode::Preview, &[]);
            println!(
                "Not applied: these files conflict even without your local changes (they \
                 differ in your commits from the version the patch was made from).{} Nothing \
                 was changed.",
                if stashed {
                    " Your changes were stashed and popped back."
                } else {
                    ""
                }
            );
            println!(
                "Apply it at the session's base commit instead:\n  {}",
                self.command("--worktree")
            );
            return Ok(ExitCode::FAILURE);
        }
        if let Err(e) = apply_mod::apply(&self.repo.git, &self.files, &verdicts) {
            self.restore(stashed);
            return Err(anyhow!(e).context("applying the patch (nothing was changed)"));
        }
        let popped = if stashed {
            Some(
                apply_mod::pop_over(&self.repo, &self.files, &verdicts)
                    .context("popping your stashed changes back (they are kept in the stash)")?,
            )
        } else {
            None
        };
        self.print(&verdicts, Mode::Applied, &[]);
        let top = self.repo.top.display();
        match popped {
            None => {
                println!(
                    "Applied to the working tree of {top} (nothing to stash; nothing committed or staged)."
                );
            }
            Some(Popped::Restored) => println!(
                "Applied to the working tree of {top}: your changes were stashed, the patch \
                 applied, and your changes popped back (nothing committed)."
            ),
            Some(Popped::Kept {
                conflicted,
                message,
            }) => {
                println!(
                    "Applied to the working tree of {top}, but popping your stashed changes \
                     back failed{}.",
                    if conflicted.is_empty() {
                        String::new()
                    } else {
                        format!(
                            ": they conflict with the patch in {} (conflict markers are in \
                             those files)",
                            conflicted.join(", ")
                        )
                    }
                );
                if !message.is_empty() {
                    println!("git says: {}", message.replace('\n', "\n  "));
                }
                println!(
                    "Your changes are kept in the stash (`git stash list`, stash@{{0}}). \
                     Resolve, then drop it with `git stash drop`."
                );
                return Ok(ExitCode::FAILURE);
            }
        }
        println!("Next: review with `git diff`, then commit.");
        Ok(ExitCode::SUCCESS)
    }

    /// Pops a stash made by this command after a failure; says so when that fails.
    fn restore(&self, stashed: bool) {
        if !stashed {
            return;
        }
        match apply_mod::stash_pop(&self.repo) {
            Ok(Popped::Restored) => {}
            Ok(Popped::Kept { message, .. }) => eprintln!(
                "ultraplan: popping your stashed changes back failed; they are kept in the \
                 stash (stash@{{0}}): {message}"
            ),
            Err(e) => eprintln!(
                "ultraplan: popping your stashed changes back failed; they are kept in the \
                 stash (stash@{{0}}): {e}"
            ),
        }
    }

    /// The choices, asked on the terminal.
    fn ask(&self, dirt: &Dirt) -> anyhow::Result<Choice> {
        let path = self
            .worktree_plan()
            .map(|p| p.path.display().to_string())
            .unwrap_or_else(|_| "next to this repository".to_owned());
        let worktree = format!(
            "Worktree: apply on a new branch {} in a fresh worktree ({path})",
            apply_mod::branch_name(self.id)
        );
        let mut items = vec![(worktree, Choice::Worktree)];
        if !dirt.is_clean() {
            items.push((
                "Stash, apply, pop: stash my changes, apply here, then pop them back".to_owned(),
                Choice::Stash,
            ));
        }
        items.push(("Cancel: change nothing".to_owned(), Choice::Cancel));
        let labels: Vec<&str> = items.iter().map(|(l, _)| l.as_str()).collect();
        let answer = ui::choose("How do you want to apply the patch?", &labels)?;
        Ok(answer
            .and_then(|i| items.get(i))
            .map_or(Choice::Cancel, |(_, c)| *c))
    }

    /// The ways forward, as commands to copy.
    fn options(&self, dirt: &Dirt) -> String {
        let branch = apply_mod::branch_name(self.id);
        let place = match self.worktree_plan() {
            Ok(plan) => format!("new branch {branch} in {}", plan.path.display()),
            Err(e) => format!("new branch {branch} ({e})"),
        };
        let mut choices = vec![(self.command("--worktree"), place)];
        if !dirt.is_clean() {
            choices.push((
                self.command("--stash"),
                "git stash, apply here, git stash pop".to_owned(),
            ));
        }
        choices.push((self.command("--dry-run"), "the report only".to_owned()));
        let width = choices.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
        let mut text = String::from("Choose how to apply it:");
        for (command, what) in choices {
            text.push_str(&format!("\n  {command:width$}  # {what}"));
        }
        text
    }

    /// `ultraplan pull ID FLAG`, with `-C` when one was given.
    fn command(&self, flag: &str) -> String {
        let repo = if self.args.repo == Path::new(".") {
            String::new()
        } else {
            format!(" -C {}", shell_quote(&self.args.repo))
        };
        format!("ultraplan pull {}{repo} {flag}", self.id)
    }
}

/// Why the working tree cannot take the patch as is.
fn why_not_here(dirt: &Dirt, verdicts: &[Verdict]) -> String {
    let (_, _, conflicted) = report::counts(verdicts);
    let mut reasons = Vec::new();
    if !dirt.is_clean() {
        reasons.push(format!("the working tree has {}", dirt.describe()));
    }
    match conflicted {
        0 => {}
        1 => reasons.push("1 file conflicts".to_owned()),
        n => reasons.push(format!("{n} files conflict")),
    }
    format!("{}.", reasons.join("; and "))
}

fn describe_base(plan: &WorktreePlan, session_base: Option<&str>) -> String {
    let short: String = plan.base.chars().take(12).collect();
    match (plan.at_session_base, session_base) {
        (true, _) => format!("the session's base commit {short}"),
        (false, Some(base)) => format!(
            "HEAD {short}, since the session's base commit {} is not in this repository",
            base.chars().take(12).collect::<String>()
        ),
        (false, None) => format!("HEAD {short}, since the session recorded no base commit"),
    }
}

fn exit(conflicts: bool) -> ExitCode {
    if conflicts {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Whether a person can choose: stdin, stdout and stderr (where the question goes) are
/// terminals.
fn interactive() -> bool {
    use std::io::IsTerminal;
    ui::interactive() && std::io::stdout().is_terminal()
}

/// A path as a shell word.
fn shell_quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c))
        && !text.is_empty()
    {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Waits for the execution to finish (unless `no_wait`) and downloads the patch. `None` when
/// Ctrl-C stopped the wait.
async fn download(
    client: &Client,
    id: &str,
    no_wait: bool,
) -> anyhow::Result<Option<(SessionResource, Vec<u8>)>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
    tokio::select! {
        result = wait_for_patch(client, id, no_wait) => result.map(Some),
        _ = interrupt.recv() => Ok(None),
    }
}

async fn wait_for_patch(
    client: &Client,
    id: &str,
    no_wait: bool,
) -> anyhow::Result<(SessionResource, Vec<u8>)> {
    let interval = watch::env_duration(watch::INTERVAL_ENV, Duration::from_millis)
        .unwrap_or(Duration::from_secs(POLL_INTERVAL_SECS));
    let mut transient = 0;
    let mut spinner = None;
    let no_execution = || {
        anyhow!(
            "session {id} has no remote execution to pull a patch from (no plan of it was \
             approved for execution) and no teleported plan"
        )
    };
    loop {
        let session = match client.session(id).await {
            Ok(s) => s,
            Err(e) if e.is_transient() && !no_wait && transient + 1 < MAX_TRANSIENT => {
                transient += 1;
                tracing::warn!("looking the session up failed, retrying: {e}");
                tokio::time::sleep(interval).await;
                continue;
            }
            Err(e) => return Err(anyhow!(e).context(format!("looking session {id} up"))),
        };
        transient = 0;
        let executing = match &session.execution {
            None => return Err(no_execution()),
            Some(execution) => execution.state == ExecutionState::Executing,
        };
        if !executing {
            match client.patch(id).await {
                Ok(bytes) => return Ok((session, bytes)),
                Err(ApiError::Rejected { status: 409, .. }) => {}
                Err(ApiError::Rejected {
                    status: 404, code, ..
                }) if code == "no_patch" => return Err(no_execution()),
                Err(e) => {
                    return Err(
                        anyhow!(e).context(format!("downloading the patch of session {id}"))
                    );
                }
            }
        }
        if no_wait {
            bail!(
                "the approved plan of session {id} is still being executed remotely, so there is \
                 no patch yet. Run `ultraplan pull {id}` again later, or without --no-wait to \
                 wait for it."
            );
        }
        if spinner.is_none() {
            let line = format!(
                "Waiting for the remote execution of session {id} to finish (checking every {}; \
                 Ctrl-C stops waiting and changes nothing)…",
                human(interval)
            );
            let bar = ui::spinner(&line, false);
            if bar.is_hidden() {
                eprintln!("{line}");
            }
            spinner = Some(Cleared(bar));
        }
        tokio::time::sleep(interval).await;
    }
}

/// A spinner that leaves no trace when the wait ends, however it ends.
struct Cleared(indicatif::ProgressBar);

impl Drop for Cleared {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

fn human(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        let cases = [
            ("/tmp/repo.ultraplan-s1", "/tmp/repo.ultraplan-s1"),
            ("/tmp/my repo", "'/tmp/my repo'"),
            ("/tmp/it's", r"'/tmp/it'\''s'"),
        ];
        for (path, want) in cases {
            assert_eq!(shell_quote(Path::new(path)), want);
        }
    }

    #[test]
    fn bases() {
        let plan = |at_session_base| WorktreePlan {
            path: "/w".into(),
            branch: "ultraplan/s".into(),
            base: "0123456789abcdef".into(),
            at_session_base,
        };
        let cases = [
            (
                true,
                Some("0123456789abcdef"),
                "the session's base commit 0123456789ab",
            ),
            (
                false,
                Some("fedcba9876543210"),
                "HEAD 0123456789ab, since the session's base commit fedcba987654 is not in \
                 this repository",
            ),
            (
                false,
                None,
                "HEAD 0123456789ab, since the session recorded no base commit",
            ),
        ];
        for (at, session, want) in cases {
            assert_eq!(describe_base(&plan(at), session), want);
        }
    }

    #[test]
    fn reasons_to_stay_away() {
        let dirt = Dirt {
            changed: vec!["a.rs".into()],
            untracked: vec![],
        };
        let conflict = Verdict::Conflict { reason: "x".into() };
        let cases = [
            (
                dirt.clone(),
                vec![Verdict::Clean],
                "the working tree has 1 file with uncommitted changes (a.rs).",
            ),
            (Dirt::default(), vec![conflict.clone()], "1 file conflicts."),
            (
                dirt,
                vec![conflict.clone(), conflict],
                "the working tree has 1 file with uncommitted changes (a.rs); and 2 files \
                 conflict.",
            ),
        ];
        for (dirt, verdicts, want) in cases {
            assert_eq!(why_not_here(&dirt, &verdicts), want);
        }
    }
}
