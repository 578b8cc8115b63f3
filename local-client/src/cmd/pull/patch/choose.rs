//! Choosing how to apply the checked patch: from the flags, straight in when the working tree
//! can take it, else by asking on the terminal — or, with no one to ask, by saying how.

use std::process::ExitCode;

use anyhow::Context;
use ultraplan::patch::apply as apply_mod;
use ultraplan::patch::preflight::{self, Dirt, Verdict};
use ultraplan::patch::report::Mode;

use super::pulled::{Pulled, has_conflicts};
use super::text::why_not_here;
use crate::cmd::ui;

/// How to apply the patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// Straight into the working tree, which can take it as is.
    Here,
    Worktree,
    Stash,
    Cancel,
}

impl Pulled<'_> {
    /// Checks the patch against the working tree, then applies it as chosen.
    pub(super) fn run(&self) -> anyhow::Result<ExitCode> {
        let refusals = self.refusals_here()?;
        if !refusals.is_empty() {
            return Ok(self.refuse(&refusals));
        }
        let verdicts = preflight::preflight(&self.repo.git, &self.files)
            .context("checking the patch against the working tree")?;
        let status = self.repo.status().context("reading `git status`")?;
        let dirt = preflight::dirt(&status, &self.files);
        if has_conflicts(&verdicts)
            && let Some(note) = self.base_note()
        {
            eprintln!("{note}");
        }
        if self.args.dry_run {
            return self.dry_run(&verdicts, &dirt);
        }
        if self.nothing_to_apply(&verdicts) {
            self.print(&verdicts, Mode::Applied, &[]);
            println!("Nothing to apply: every file is already applied here. Nothing was changed.");
            return Ok(ExitCode::SUCCESS);
        }
        match self.choose(&verdicts, &dirt)? {
            Some(Choice::Here) => self.apply_here(&verdicts),
            Some(Choice::Worktree) => self.in_worktree(),
            Some(Choice::Stash) => self.around_stash(&dirt),
            Some(Choice::Cancel) => {
                println!("Cancelled; nothing was changed.");
                Ok(ExitCode::FAILURE)
            }
            None => Ok(ExitCode::FAILURE),
        }
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

    /// The flags first, then a working tree that can take it, then the person at the
    /// terminal. `None` when there is no one to ask: the ways forward are printed instead.
    fn choose(&self, verdicts: &[Verdict], dirt: &Dirt) -> anyhow::Result<Option<Choice>> {
        if self.wants_worktree() {
            return Ok(Some(Choice::Worktree));
        }
        if dirt.is_clean() && !has_conflicts(verdicts) {
            return Ok(Some(Choice::Here));
        }
        if self.args.stash {
            return Ok(Some(Choice::Stash));
        }
        self.print(verdicts, Mode::Preview, &[]);
        if interactive() {
            println!(
                "It cannot go straight into the working tree: {}",
                why_not_here(dirt, verdicts)
            );
            return self.ask(dirt).map(Some);
        }
        println!(
            "Not applied: {} Nothing was changed.",
            why_not_here(dirt, verdicts)
        );
        println!("{}", self.options(dirt));
        Ok(None)
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
    pub(super) fn options(&self, dirt: &Dirt) -> String {
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
}

/// Whether a person can choose: stdin, stdout and stderr (where the question goes) are
/// terminals.
fn interactive() -> bool {
    use std::io::IsTerminal;
    ui::interactive() && std::io::stdout().is_terminal()
}
