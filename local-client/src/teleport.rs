//! Teleport back: the choice offered when a plan comes back to the terminal, and how each
//! choice runs the local coding command.

use std::path::Path;
use std::process::Command;

use crate::state::{Handled, SessionState, StateStore};

/// The question asked.
pub const QUESTION: &str = "Ultraplan approved — How should the plan be implemented?";

/// Set for the local command when it must start a fresh session.
pub const FRESH_SESSION_ENV: &str = "ULTRAPLAN_FRESH_SESSION";

/// How to implement a teleported plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Run the local coding command with the plan.
    ImplementHere,
    /// Run the local coding command told to start fresh with only the plan.
    NewSession,
    /// Save the plan under `.ultraplan/plans/`.
    SaveToFile,
}

impl Choice {
    pub const ALL: [Choice; 3] = [
        Choice::ImplementHere,
        Choice::NewSession,
        Choice::SaveToFile,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Choice::ImplementHere => "Implement here",
            Choice::NewSession => "Start new session",
            Choice::SaveToFile => "Save to file",
        }
    }

    /// What the state file records.
    pub fn handled(self) -> Handled {
        match self {
            Choice::ImplementHere => Handled::ImplementHere,
            Choice::NewSession => Handled::NewSession,
            Choice::SaveToFile => Handled::SaveToFile,
        }
    }
}

/// The argument given to a fresh session: only the plan, with the instruction to start over.
pub fn fresh_session_prompt(plan: &str) -> String {
    format!(
        "Start a fresh session: ignore any earlier conversation. Implement this plan, which \
         was written and approved with ultraplan:\n\n{plan}"
    )
}

/// The local coding command for a choice, run through `sh` so the configured command line may
/// carry its own arguments; the plan is one extra argument. `None` for [`Choice::SaveToFile`].
pub fn local_command(
    command_line: &str,
    choice: Choice,
    plan: &str,
    dir: &Path,
) -> Option<Command> {
    let argument = match choice {
        Choice::ImplementHere => plan.to_owned(),
        Choice::NewSession => fresh_session_prompt(plan),
        Choice::SaveToFile => return None,
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{command_line} \"$@\""))
        .arg("ultraplan")
        .arg(argument)
        .current_dir(dir);
    if choice == Choice::NewSession {
        cmd.env(FRESH_SESSION_ENV, "1");
    }
    Some(cmd)
}

/// Teleported plans nobody has taken up yet, newest first.
pub fn waiting(store: &StateStore) -> Vec<SessionState> {
    store
        .list()
        .into_iter()
        .filter(|s| s.teleport_waiting().is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_command_gets_the_plan_as_one_argument() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("args");
        let line = format!(
            "printf '%s|' --flag >{0}; printf '%s' \"$1\" >>{0}; true",
            out.display()
        );
        let plan = "# Plan\n- step \"one\" $HOME";
        let status = local_command(&line, Choice::ImplementHere, plan, dir.path())
            .unwrap()
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            format!("--flag|{plan}")
        );
        let fresh = local_command("true", Choice::NewSession, plan, dir.path()).unwrap();
        assert!(fresh.get_envs().any(|(k, _)| k == FRESH_SESSION_ENV));
        assert!(local_command("true", Choice::SaveToFile, plan, dir.path()).is_none());
    }
}
