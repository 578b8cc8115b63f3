//! Checks on what clients send: a clear 400 with a reason, before anything is stored.

use ultraplan_protocol::api::CreateSessionRequest;
use ultraplan_protocol::events::{
    ContentBlock, ControlRequest, EventBody, PermissionMode, UserContent, UserEvent,
};
use ultraplan_protocol::session::PromptVariant;

use super::error::{SessionError, SessionResult};
use crate::config::Config;
use ultraplan_bundle::is_valid_sha256;

const MAX_EVENTS_PER_REQUEST: usize = 16;
const MAX_TITLE_CHARS: usize = 200;
const MAX_DRAFT_PLAN_BYTES: usize = 256 * 1024;

fn invalid(message: impl Into<String>) -> SessionError {
    SessionError::invalid("invalid_event", message)
}

/// Validate a create request; returns the title to store (derived from the prompt when blank).
pub fn validate_create(req: &CreateSessionRequest, config: &Config) -> SessionResult<String> {
    if !is_valid_sha256(&req.bundle_id) {
        return Err(SessionError::invalid(
            "invalid_bundle_id",
            "bundle_id must be the 64-character lowercase hex sha256 of an uploaded bundle",
        ));
    }
    check_count(&req.events)?;
    let mut prompt = None;
    for (i, event) in req.events.iter().enumerate() {
        match event {
            EventBody::ControlRequest(c) => check_control(&c.request, i)?,
            EventBody::User(u) => {
                check_user(u, i, false)?;
                prompt.get_or_insert_with(|| u.message.content.text());
            }
            _ => {
                return Err(invalid(format!(
                    "events[{i}]: a new session takes only control_request and user events"
                )));
            }
        }
    }
    let prompt = prompt
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| invalid("events must include a user message with the prompt"))?;
    check_context(req, config)?;
    Ok(title_from(&req.title, &prompt))
}

fn check_context(req: &CreateSessionRequest, config: &Config) -> SessionResult<()> {
    let context = &req.session_context;
    if let Some(variant) = context
        .prompt_variant
        .as_ref()
        .filter(|v| PromptVariant::parse(v).is_none())
    {
        let names: Vec<_> = PromptVariant::ALL.iter().map(|v| v.as_str()).collect();
        return Err(SessionError::invalid(
            "invalid_prompt_variant",
            format!(
                "prompt_variant '{variant}' is not one of {}",
                names.join(", ")
            ),
        ));
    }
    if let Some(model) = &context.model {
        let openai = config.openai_api_key.is_some() || config.openai_base_url.is_some();
        if let Some(problem) =
            crate::config::model_problem(model, config.anthropic_api_key.is_some(), openai)
        {
            return Err(SessionError::invalid("invalid_model", problem));
        }
    }
    if context
        .draft_plan
        .as_ref()
        .is_some_and(|d| d.len() > MAX_DRAFT_PLAN_BYTES)
    {
        return Err(SessionError::invalid(
            "draft_plan_too_large",
            format!("draft_plan exceeds {MAX_DRAFT_PLAN_BYTES} bytes"),
        ));
    }
    Ok(())
}

fn title_from(title: &str, prompt: &str) -> String {
    let source = if title.trim().is_empty() {
        prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
    } else {
        title
    };
    let trimmed = source.trim();
    match trimmed.char_indices().nth(MAX_TITLE_CHARS) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_owned(),
    }
}

fn check_count(events: &[EventBody]) -> SessionResult<()> {
    if events.is_empty() {
        return Err(invalid("events must not be empty"));
    }
    if events.len() > MAX_EVENTS_PER_REQUEST {
        return Err(invalid(format!(
            "at most {MAX_EVENTS_PER_REQUEST} events per request"
        )));
    }
    Ok(())
}

fn check_control(request: &ControlRequest, i: usize) -> SessionResult<()> {
    match request {
        ControlRequest::SetPermissionMode {
            mode: PermissionMode::Plan,
            ..
        } => Ok(()),
        ControlRequest::SetPermissionMode { mode, .. } => Err(invalid(format!(
            "events[{i}]: sessions start in plan mode, not {mode:?}"
        ))),
        ControlRequest::Interrupt {} => Err(invalid(format!(
            "events[{i}]: interrupt is not a valid first event"
        ))),
    }
}

fn check_user(u: &UserEvent, i: usize, allow_tool_results: bool) -> SessionResult<()> {
    if u.parent_tool_use_id.is_some() {
        return Err(invalid(format!(
            "events[{i}]: clients cannot post subagent events (parent_tool_use_id)"
        )));
    }
    match &u.message.content {
        UserContent::Text(t) if t.trim().is_empty() => {
            Err(invalid(format!("events[{i}]: the message is empty")))
        }
        UserContent::Text(_) => Ok(()),
        UserContent::Blocks(blocks) if blocks.is_empty() => {
            Err(invalid(format!("events[{i}]: the message has no content")))
        }
        UserContent::Blocks(blocks) => blocks.iter().try_for_each(|b| match b {
            ContentBlock::Text { .. } => Ok(()),
            ContentBlock::ToolResult { .. } if allow_tool_results => Ok(()),
            _ => Err(invalid(format!(
                "events[{i}]: user messages carry text{} blocks only",
                if allow_tool_results {
                    " and tool_result"
                } else {
                    ""
                }
            ))),
        }),
    }
}

/// Validate events a client posts to a running session: user messages only (answers, steering).
pub fn validate_client_events(events: &[EventBody]) -> SessionResult<()> {
    check_count(events)?;
    for (i, event) in events.iter().enumerate() {
        match event {
            EventBody::User(u) => check_user(u, i, true)?,
            _ => {
                return Err(invalid(format!(
                    "events[{i}]: clients may post only user messages"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(events: serde_json::Value, context: serde_json::Value) -> CreateSessionRequest {
        serde_json::from_value(json!({
            "title": "",
            "bundle_id": "a".repeat(64),
            "events": events,
            "session_context": context,
        }))
        .expect("valid shape")
    }

    fn control() -> serde_json::Value {
        json!({"type":"control_request","request":{"subtype":"set_permission_mode","mode":"plan","ultraplan":true}})
    }

    fn user(text: &str) -> serde_json::Value {
        json!({"type":"user","message":{"role":"user","content":text}})
    }

    #[test]
    fn create_requests_are_checked() {
        let config = Config::for_data_dir(std::path::Path::new("/tmp"));
        let cases = [
            (
                json!([control(), user("fix auth\nmore")]),
                json!({}),
                Ok("fix auth"),
            ),
            (json!([user("only prompt")]), json!({}), Ok("only prompt")),
            (json!([]), json!({}), Err("invalid_event")),
            (json!([control()]), json!({}), Err("invalid_event")),
            (
                json!([control(), user("  ")]),
                json!({}),
                Err("invalid_event"),
            ),
            (
                json!([{"type":"control_request","request":{"subtype":"set_permission_mode","mode":"default"}}, user("x")]),
                json!({}),
                Err("invalid_event"),
            ),
            (
                json!([json!({"type":"result","subtype":"success"}), user("x")]),
                json!({}),
                Err("invalid_event"),
            ),
            (
                json!([user("x")]),
                json!({"prompt_variant":"visual_plan"}),
                Ok("x"),
            ),
            (
                json!([user("x")]),
                json!({"prompt_variant":"bogus"}),
                Err("invalid_prompt_variant"),
            ),
            (
                json!([user("x")]),
                json!({"model":"anthropic:claude"}),
                Err("invalid_model"),
            ),
            (json!([user("x")]), json!({"model":"offline"}), Ok("x")),
        ];
        for (events, context, want) in cases {
            let got = validate_create(&request(events.clone(), context.clone()), &config);
            match (got, want) {
                (Ok(title), Ok(t)) => assert_eq!(title, t),
                (Err(SessionError::Invalid { code, .. }), Err(c)) => {
                    assert_eq!(code, c, "{events}")
                }
                (got, want) => panic!("{events} {context}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn long_titles_are_cut_on_a_char_boundary() {
        let title = title_from(&"é".repeat(300), "");
        assert_eq!(title.chars().count(), MAX_TITLE_CHARS + 1);
        assert!(title.ends_with('…'));
    }

    #[test]
    fn client_events_are_user_messages_only() {
        let ok: Vec<EventBody> = vec![EventBody::user_text("answer")];
        assert!(validate_client_events(&ok).is_ok());
        let result = EventBody::tool_result("t1", "my answer", false);
        assert!(validate_client_events(&[result]).is_ok());
        let assistant = EventBody::assistant(vec![ContentBlock::text("hi")]);
        assert!(validate_client_events(&[assistant]).is_err());
        assert!(validate_client_events(&[]).is_err());
    }
}
