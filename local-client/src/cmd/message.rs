//! `message ID "…" [--json]`: answer the agent's question or steer it. The message is stored
//! in the session's log and delivered to the agent, which reads it now when it was waiting,
//! or queues it while it works (see [`ultraplan::script::message`]).

use std::process::ExitCode;

use anyhow::{Context, bail};
use ultraplan::api::ApiError;
use ultraplan::sanitize;
use ultraplan::script::message::{Delivery, refusal};
use ultraplan_protocol::session::SessionStatus;

use super::Env;

/// The `message` command.
pub async fn command(env: &Env, id: &str, text: &str, json: bool) -> anyhow::Result<ExitCode> {
    if text.trim().is_empty() {
        bail!("the message is empty");
    }
    let (client, _) = env.client()?;
    let session = client.session(id).await.map_err(|e| explain(id, e))?;
    if session.session_status == SessionStatus::Archived {
        bail!(
            "session {} is archived: it takes no more messages",
            sanitize::line(id)
        );
    }
    let stored = client
        .post_message(id, text)
        .await
        .map_err(|e| explain(id, e))?;
    let event_id = stored
        .data
        .first()
        .map(|e| e.id)
        .context("the server stored no event for the message")?;
    let delivery = Delivery::new(id, event_id, session.session_status, session.phase);
    if json {
        println!("{}", sanitize::json(&serde_json::to_string(&delivery)?));
    } else {
        println!("{}", sanitize::line(&delivery.sentence(session.phase)));
    }
    Ok(ExitCode::SUCCESS)
}

fn explain(id: &str, error: ApiError) -> anyhow::Error {
    match refusal(id, &error) {
        Some(reason) => anyhow::anyhow!(reason),
        None => anyhow::Error::new(error).context("sending the message"),
    }
}
