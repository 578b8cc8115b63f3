//! Applying the patch straight into the working tree, or on a new branch in a fresh worktree.

use std::process::ExitCode;

use anyhow::{Context, anyhow};
use ultraplan::patch::apply as apply_mod;
use ultraplan::patch::check::Tree;
use ultraplan::patch::git::GitError;
use ultraplan::patch::preflight::{self, Verdict};
use ultraplan::patch::report::{Markers, Mode};
use ultraplan::patch::{Refusal, WorktreePlan, write};

use super::pulled::{Pulled, exit, has_conflicts};
use super::text::{describe_base, shell_quote};

impl Pulled<'_> {
    /// Straight into the working tree (clean tree, no conflicts).
    pub(super) fn apply_here(&self, verdicts: &[Verdict]) -> anyhow::Result<ExitCode> {
        write::apply(&self.repo.git, &self.files, verdicts)
            .context("applying the patch (nothing was changed)")?;
        self.print(verdicts, Mode::Applied, &[]);
        println!(
            "Applied to the working tree of {} (nothing committed or staged).",
            self.repo.top.display()
        );
        println!("Next: review with `git diff` (and `git status` for new files), then commit.");
        Ok(ExitCode::SUCCESS)
    }

    /// A new branch in a fresh worktree at the session's base commit.
    pub(super) fn in_worktree(&self) -> anyhow::Result<ExitCode> {
        let plan = match self.worktree_plan() {
            Ok(plan) => plan,
            Err(e) => {
                eprintln!("ultraplan: cannot make the worktree: {e}. Nothing was changed.");
                return Ok(ExitCode::FAILURE);
            }
        };
        // The commit it starts from is checked before the worktree exists.
        let refusals = self.refusals(Tree::Commit(&plan.base))?;
        if !refusals.is_empty() {
            return Ok(self.refuse(&refusals));
        }
        let git = apply_mod::create_worktree(&self.repo, &plan).context("creating the worktree")?;
        // And the worktree as checked out, before anything is written there.
        let refusals = self.refusals(Tree::Disk(&plan.path))?;
        if !refusals.is_empty() {
            return Ok(self.undo_worktree(&plan, &refusals));
        }
        let verdicts = preflight::preflight(&git, &self.files)
            .context("checking the patch against the new worktree")?;
        let left = match write::apply_leaving_conflicts(&git, &self.files, &verdicts) {
            Ok(left) => left,
            Err(GitError::Refused(why)) => {
                return Ok(self.undo_worktree(&plan, &[Refusal::new("(the patch)", why)]));
            }
            Err(e) => {
                return Err(anyhow!(e).context(format!(
                    "applying the patch in {} (the worktree is left as created)",
                    plan.path.display()
                )));
            }
        };
        let conflicts = has_conflicts(&verdicts);
        let markers: Vec<Markers> = left
            .into_iter()
            .map(|left| if left { Markers::Left } else { Markers::None })
            .collect();
        self.print(&verdicts, Mode::Applied, &markers);
        self.print_worktree_next(&plan, conflicts);
        Ok(exit(conflicts))
    }

    /// A check in the new worktree refused the patch: the worktree and its branch go again.
    fn undo_worktree(&self, plan: &WorktreePlan, refusals: &[Refusal]) -> ExitCode {
        if let Err(e) = apply_mod::remove_worktree(&self.repo, plan) {
            eprintln!(
                "ultraplan: removing the worktree {} again failed: {e}",
                plan.path.display()
            );
        }
        self.refuse(refusals)
    }

    /// Where it went, and what to do there.
    fn print_worktree_next(&self, plan: &WorktreePlan, conflicts: bool) {
        println!(
            "Applied in a new worktree at {}, on branch {} starting at {}. Nothing was \
             committed, and your working tree was not touched.",
            plan.path.display(),
            plan.branch,
            describe_base(plan, self.base.as_deref())
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
    }
}
