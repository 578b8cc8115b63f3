//! Applying the patch around a stash: `git stash push --include-untracked`, apply,
//! `git stash pop` — and popping the stash back whenever the patch is not applied.

use std::process::ExitCode;

use anyhow::{Context, anyhow};
use ultraplan::patch::Popped;
use ultraplan::patch::apply as apply_mod;
use ultraplan::patch::preflight::{self, Dirt, Verdict};
use ultraplan::patch::report::Mode;

use super::pulled::{Pulled, has_conflicts};

impl Pulled<'_> {
    /// `git stash push --include-untracked`, apply, `git stash pop`.
    pub(super) fn around_stash(&self, dirt: &Dirt) -> anyhow::Result<ExitCode> {
        let stashed = self.stash(dirt)?;
        let checked = preflight::preflight(&self.repo.git, &self.files)
            .context("checking the patch after stashing");
        let verdicts = match checked {
            Ok(v) => v,
            Err(e) => {
                self.restore(stashed);
                return Err(e);
            }
        };
        if has_conflicts(&verdicts) {
            self.restore(stashed);
            self.refuse_conflicts(&verdicts, stashed);
            return Ok(ExitCode::FAILURE);
        }
        if let Err(e) = ultraplan::patch::write::apply(&self.repo.git, &self.files, &verdicts) {
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
        Ok(self.report_popped(popped))
    }

    /// Stashes the local changes, if there are any; whether it did.
    fn stash(&self, dirt: &Dirt) -> anyhow::Result<bool> {
        if dirt.is_clean() {
            return Ok(false);
        }
        apply_mod::stash_push(&self.repo, self.id)
            .context("stashing your changes (nothing was changed)")
    }

    /// Files that conflict even without the local changes: not applied; a worktree instead.
    fn refuse_conflicts(&self, verdicts: &[Verdict], stashed: bool) {
        self.print(verdicts, Mode::Preview, &[]);
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
    }

    /// What became of the stashed changes after the patch was applied.
    fn report_popped(&self, popped: Option<Popped>) -> ExitCode {
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
                self.report_kept(&conflicted, &message);
                return ExitCode::FAILURE;
            }
        }
        println!("Next: review with `git diff`, then commit.");
        ExitCode::SUCCESS
    }

    /// Popping the stash back over the patch failed: the changes stay in the stash.
    fn report_kept(&self, conflicted: &[String], message: &str) {
        let top = self.repo.top.display();
        println!(
            "Applied to the working tree of {top}, but popping your stashed changes back failed{}.",
            if conflicted.is_empty() {
                String::new()
            } else {
                format!(
                    ": they conflict with the patch in {} (conflict markers are in those files)",
                    ultraplan::sanitize::line(&conflicted.join(", "))
                )
            }
        );
        if !message.is_empty() {
            let message = ultraplan::sanitize::text(message);
            println!("git says: {}", message.replace('\n', "\n  "));
        }
        println!(
            "Your changes are kept in the stash (`git stash list`, stash@{{0}}). Resolve, then \
             drop it with `git stash drop`."
        );
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
                 stash (stash@{{0}}): {}",
                ultraplan::sanitize::text(&message)
            ),
            Err(e) => eprintln!(
                "ultraplan: popping your stashed changes back failed; they are kept in the \
                 stash (stash@{{0}}): {}",
                ultraplan::sanitize::text(&e.to_string())
            ),
        }
    }
}
