//! What is known once the patch is downloaded, and what every way of applying it shares.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use ultraplan::patch::apply::{self as apply_mod, WorktreeError};
use ultraplan::patch::check::{self, Tree};
use ultraplan::patch::report::{self, Markers, Mode};
use ultraplan::patch::{FilePatch, Refusal, Repo, Verdict, WorktreePlan};

use super::text::shell_quote;
use crate::cli::PullArgs;

/// Everything known once the patch is checked.
pub(super) struct Pulled<'a> {
    pub(super) id: &'a str,
    pub(super) args: &'a PullArgs,
    pub(super) repo: Repo,
    pub(super) files: Vec<FilePatch>,
    pub(super) headline: String,
    /// The session's base commit, if it recorded one.
    pub(super) base: Option<String>,
    /// The patch as downloaded, every byte (git reads all of it when it is checked).
    pub(super) patch: Vec<u8>,
}

impl Pulled<'_> {
    /// The headline and the per-file lines.
    pub(super) fn print(&self, verdicts: &[Verdict], mode: Mode, markers: &[Markers]) {
        println!("{}", self.headline);
        print!(
            "{}",
            report::render(&report::lines(&self.files, verdicts, mode, markers))
        );
    }

    /// Every file of the patch that may not be applied, and why, checked against `tree` (git
    /// only reads here). Empty when all may.
    pub(super) fn refusals(&self, tree: Tree<'_>) -> anyhow::Result<Vec<Refusal>> {
        check::check(&self.repo.git, &self.patch, &self.files, tree)
            .context("checking the patch before applying it (nothing was changed)")
    }

    /// The refusals against the tree this command would apply to: the working tree, or the
    /// commit a requested worktree would start from.
    pub(super) fn refusals_here(&self) -> anyhow::Result<Vec<Refusal>> {
        match self.worktree_plan().ok().filter(|_| self.wants_worktree()) {
            Some(plan) => self.refusals(Tree::Commit(&plan.base)),
            None => self.refusals(Tree::Disk(&self.repo.top)),
        }
    }

    /// The report of a refused patch: every refused file and why. Nothing was changed.
    pub(super) fn refuse(&self, refusals: &[Refusal]) -> ExitCode {
        println!("{}", self.headline);
        print!("{}", report::render(&report::refused(refusals)));
        let n = refusals.len();
        println!(
            "Refused: {} cannot be applied safely (listed above), so none of the patch was \
             applied. Nothing was changed.",
            if n == 1 {
                "1 file".to_owned()
            } else {
                format!("{n} files")
            }
        );
        ExitCode::FAILURE
    }

    /// Whether `--worktree` or `--worktree-dir` asked for a worktree.
    pub(super) fn wants_worktree(&self) -> bool {
        self.args.worktree || self.args.worktree_dir.is_some()
    }

    /// Every file is already applied here, and no worktree was asked for.
    pub(super) fn nothing_to_apply(&self, verdicts: &[Verdict]) -> bool {
        let (applies, _, _) = report::counts(verdicts);
        applies == 0 && !has_conflicts(verdicts) && !self.wants_worktree()
    }

    pub(super) fn worktree_plan(&self) -> Result<WorktreePlan, WorktreeError> {
        apply_mod::plan_worktree(
            &self.repo,
            self.id,
            self.base.as_deref(),
            self.args.worktree_dir.as_deref(),
        )
    }

    /// `ultraplan pull ID FLAG`, with `-C` when one was given.
    pub(super) fn command(&self, flag: &str) -> String {
        let repo = if self.args.repo == Path::new(".") {
            String::new()
        } else {
            format!(" -C {}", shell_quote(&self.args.repo))
        };
        format!("ultraplan pull {}{repo} {flag}", self.id)
    }
}

pub(super) fn has_conflicts(verdicts: &[Verdict]) -> bool {
    verdicts.iter().any(Verdict::is_conflict)
}

/// Failure when some file conflicts.
pub(super) fn exit(conflicts: bool) -> ExitCode {
    if conflicts {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
