//! `ultraplan hook claude-code`: the Claude Code `UserPromptSubmit` hook. Prints at most one
//! JSON object on stdout and always exits 0 unless its input is unreadable.

use std::io::Read;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;
use ultraplan::hook::{self, HookInput};
use ultraplan::keyword;
use ultraplan::sanitize;
use ultraplan::state::Handled;

use super::launch::{self, Request};
use super::{Env, archive_and_record};

/// The `hook claude-code` command.
pub async fn claude_code(env: &Env) -> anyhow::Result<ExitCode> {
    let mut input = Vec::new();
    std::io::stdin()
        .read_to_end(&mut input)
        .context("reading the hook input")?;
    let input = hook::parse(&input)?;
    if let Some(output) = answer(env, &input).await {
        println!("{}", sanitize::json(&output.to_string()));
    }
    Ok(ExitCode::SUCCESS)
}

async fn answer(env: &Env, input: &HookInput) -> Option<Value> {
    if keyword::detect(&input.prompt).triggered() {
        return Some(launch_for(env, input).await);
    }
    let root = ultraplan::bundle::repo_root(&input.cwd);
    let states = env.store.list();
    let state = hook::waiting_for(&states, &root)?;
    let plan = state.teleport_waiting()?;
    let context = hook::teleport_context(state, plan);
    if let Err(e) = env
        .store
        .update(&state.session_id, |s| s.handled = Some(Handled::Hook))
    {
        tracing::warn!("{e}");
    }
    archive_and_record(env, &state.server, &state.session_id).await;
    Some(hook::additional_context(&context))
}

async fn launch_for(env: &Env, input: &HookInput) -> Value {
    match try_launch(env, input).await {
        Ok((title, url)) => hook::block(&format!(
            "ultraplan is planning \"{}\" remotely; review at {} (follow it with \
             `ultraplan status`)",
            sanitize::line(&title),
            sanitize::line(&url)
        )),
        Err(e) => hook::block(&format!(
            "ultraplan could not launch: {}",
            sanitize::line(&format!("{e:#}"))
        )),
    }
}

async fn try_launch(env: &Env, input: &HookInput) -> anyhow::Result<(String, String)> {
    let Some(prompt) = launch::prompt_to_send(&input.prompt) else {
        anyhow::bail!("say what to plan after the word ultraplan");
    };
    let (client, settings) = env.client()?;
    let eligibility = launch::check_eligible(&client, &settings).await?;
    let request = Request {
        prompt,
        draft_plan: None,
        environment: None,
        repo: input.cwd.clone(),
        watch: !super::no_watch(),
        quiet: true,
        codec: ultraplan::bundle::Codec::negotiate(&eligibility.accepts_bundle_encodings),
        resumable: eligibility.resumable_bundle_uploads,
        max_bundle_bytes: eligibility.max_bundle_bytes,
        incremental: eligibility.incremental_bundles,
    };
    let launched = launch::run(env, &client, &settings, &request).await?;
    Ok((launched.session.title, launched.session.url))
}
