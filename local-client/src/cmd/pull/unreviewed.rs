//! `ultraplan pull ID` for a plan the session's time limit ended before anyone reviewed it:
//! nothing was executed and there is no patch, but the plan is not lost. It is printed, and
//! saved to `.ultraplan/plans/<id>.md` when the poller has not saved it already.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use ultraplan::plan_file;
use ultraplan::state::{FailureReason, SessionState};

use super::super::{Env, repo_root_of};

/// Prints the unreviewed `plan` of the archived session `id` and says where it is saved.
pub fn command(
    env: &Env,
    id: &str,
    plan: &str,
    local: Option<&SessionState>,
) -> anyhow::Result<ExitCode> {
    // The server's text: printed and saved without controls or escape sequences.
    let plan = ultraplan::sanitize::text(plan);
    let path = match saved_already(local) {
        Some(path) => path,
        None => {
            let root = repo_root_of(local);
            let path = plan_file::save_unreviewed(&root, id, &plan)
                .with_context(|| format!("saving the plan under {}", root.display()))?;
            if local.is_some() {
                env.store.update(id, |s| s.plan_file = Some(path.clone()))?;
            }
            path
        }
    };
    // Only the poller knows the limit was the cause; a session stopped by hand also ends here.
    let ended = match local.and_then(|s| s.failure) {
        Some(FailureReason::TimeoutPending) => "timed out",
        _ => "ended",
    };
    println!("{}", plan.trim_end());
    eprintln!(
        "\nSession {id} {ended} before its plan was reviewed, so nothing was executed and \
         there is no patch to apply. The last plan was saved to {}",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The file the poller saved the plan to, when it is still there.
fn saved_already(local: Option<&SessionState>) -> Option<PathBuf> {
    local
        .and_then(|s| s.plan_file.clone())
        .filter(|p| p.is_file())
}
