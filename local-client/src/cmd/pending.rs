//! Teleport back: when a plan came back to the terminal, the next command first asks how to
//! implement it — here, in a new session of the local coding command, or saved to a file.
//! Every choice archives the remote session. Without a terminal it only says where things are.

use std::process::ExitStatus;

use anyhow::Context;
use ultraplan::plan_file;
use ultraplan::sanitize;
use ultraplan::state::SessionState;
use ultraplan::teleport::{self, Choice};

use super::{Env, archive_and_record, repo_root_of, ui};

/// Exit status of `sh` when the command is not found.
const NOT_FOUND: i32 = 127;

/// Offers every teleported plan that waits.
pub async fn offer_waiting(env: &Env) -> anyhow::Result<()> {
    for state in teleport::waiting(&env.store) {
        offer(env, &state).await?;
    }
    Ok(())
}

/// Offers one teleported plan (if it still waits).
pub async fn offer(env: &Env, state: &SessionState) -> anyhow::Result<()> {
    let Some(plan) = state.teleport_waiting() else {
        return Ok(());
    };
    let id = &sanitize::line(&state.session_id);
    if !ui::interactive() {
        let path = plan_file::plans_dir(&repo_root_of(Some(state))).join(format!(
            "{}-{}.md",
            plan_file::today(),
            plan_file::slug(&state.title)
        ));
        eprintln!(
            "ultraplan: the plan of session {id} (\"{}\") was teleported back and waits. Run \
             `ultraplan pull {id}` to save it to {}, or run `ultraplan` in a terminal to \
             implement it.",
            sanitize::line(&state.title),
            path.display()
        );
        return Ok(());
    }
    eprintln!(
        "◆ Plan teleported back from session {id}: {}\n",
        sanitize::line(&state.title)
    );
    eprintln!("{}\n", sanitize::text(plan));
    let labels: Vec<&str> = Choice::ALL.iter().map(|c| c.label()).collect();
    let Some(index) = ui::choose(teleport::QUESTION, &labels)? else {
        eprintln!("Left for later; it will be offered again.");
        return Ok(());
    };
    let choice = Choice::ALL
        .get(index)
        .copied()
        .unwrap_or(Choice::SaveToFile);
    take(env, state, plan, choice).await
}

/// Carries out a choice: records it, archives the session, then saves or runs.
pub async fn take(
    env: &Env,
    state: &SessionState,
    plan: &str,
    choice: Choice,
) -> anyhow::Result<()> {
    let root = repo_root_of(Some(state));
    let id = &state.session_id;
    // The server's text, bound for a file, a terminal and the local coding command.
    let plan = &sanitize::text(plan);
    let saved = match choice {
        Choice::SaveToFile => Some(save(&root, state, plan)?),
        _ => None,
    };
    env.store.update(id, |s| {
        s.handled = Some(choice.handled());
        s.plan_file.clone_from(&saved);
    })?;
    archive_and_record(env, &state.server, id).await;
    if let Some(path) = saved {
        println!("Plan saved to {}", path.display());
        return Ok(());
    }
    let command_line = env.local_command();
    let Some(mut command) = teleport::local_command(&command_line, choice, plan, &root) else {
        return Ok(());
    };
    eprintln!("Running `{command_line}` in {} …", root.display());
    let status: std::io::Result<ExitStatus> = command.status();
    match status {
        Ok(s) if s.code() == Some(NOT_FOUND) => {
            let path = save(&root, state, plan)?;
            env.store.update(id, |s| s.plan_file = Some(path.clone()))?;
            eprintln!(
                "ultraplan: `{command_line}` was not found (set ULTRAPLAN_LOCAL_COMMAND or \
                 local_command in the config). The plan was saved to {}",
                path.display()
            );
        }
        Ok(s) if !s.success() => eprintln!("ultraplan: `{command_line}` exited with {s}"),
        Ok(_) => {}
        Err(e) => eprintln!("ultraplan: could not run `{command_line}`: {e}"),
    }
    Ok(())
}

fn save(
    root: &std::path::Path,
    state: &SessionState,
    plan: &str,
) -> anyhow::Result<std::path::PathBuf> {
    plan_file::save(root, &plan_file::today(), &state.title, plan)
        .with_context(|| format!("saving the plan under {}", root.display()))
}
