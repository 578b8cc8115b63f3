//! `--dry-run`: the report, and what the same command would do without it.

use std::process::ExitCode;

use ultraplan::patch::preflight::{Dirt, Verdict};
use ultraplan::patch::report::Mode;

use super::pulled::{Pulled, exit, has_conflicts};
use super::text::{describe_base, why_not_here};

impl Pulled<'_> {
    pub(super) fn dry_run(&self, verdicts: &[Verdict], dirt: &Dirt) -> anyhow::Result<ExitCode> {
        self.print(verdicts, Mode::Preview, &[]);
        println!("Dry run: nothing was changed.");
        self.print_would(verdicts, dirt);
        Ok(exit(has_conflicts(verdicts)))
    }

    /// What would happen without `--dry-run`.
    fn print_would(&self, verdicts: &[Verdict], dirt: &Dirt) {
        let top = self.repo.top.display();
        if self.nothing_to_apply(verdicts) {
            println!("Nothing to apply: every file is already applied here.");
        } else if self.wants_worktree() {
            println!("{}", self.would_worktree());
        } else if dirt.is_clean() && !has_conflicts(verdicts) {
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
    }

    /// Where the worktree would be made, or why it could not.
    fn would_worktree(&self) -> String {
        match self.worktree_plan() {
            Ok(plan) => format!(
                "Without --dry-run it would be applied in a new worktree at {} on branch {} \
                 starting at {} (and checked there again first).",
                plan.path.display(),
                plan.branch,
                describe_base(&plan, self.base.as_deref())
            ),
            Err(e) => format!("Without --dry-run no worktree could be made: {e}."),
        }
    }
}
