//! What `ultraplan message` did: the stored event, and whether the agent reads it now or
//! queues it. The agent answers an open question or starts its next turn with a message it
//! was waiting for; while it works, or while a plan waits for a decision, the message waits
//! in its queue until then.

use serde::Serialize;
use ultraplan_protocol::session::{Phase, SessionStatus};

use crate::api::ApiError;

/// The `message --json` shape (every key always present).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    /// The session.
    pub id: String,
    /// The id of the stored user event.
    pub event_id: i64,
    /// Always `true`: a delivery exists only once the server stored the message.
    pub delivered: bool,
    /// The session's status just before the message was posted.
    pub session_status: SessionStatus,
    /// The agent was busy (working, or waiting for a plan decision): the message queues.
    pub queued: bool,
}

impl Delivery {
    /// A delivery of stored event `event_id` to a session that was `status` / `phase`.
    pub fn new(id: &str, event_id: i64, status: SessionStatus, phase: Phase) -> Self {
        Self {
            id: crate::sanitize::line(id),
            event_id,
            delivered: true,
            session_status: status,
            queued: status == SessionStatus::Running || phase == Phase::PlanReady,
        }
    }

    /// What happened, for a person.
    pub fn sentence(&self, phase: Phase) -> String {
        let head = format!(
            "Delivered to session {} (event {}).",
            self.id, self.event_id
        );
        let tail = if phase == Phase::PlanReady {
            "A plan waits for your decision: the agent reads the message once the plan is \
             approved or rejected."
        } else if self.queued {
            "The agent is busy: the message is queued and read when its current step ends."
        } else {
            "The agent was waiting and reads it now."
        };
        format!("{head} {tail}")
    }
}

/// A clear reason for the refusals a script may meet, `None` for other errors.
pub fn refusal(id: &str, error: &ApiError) -> Option<String> {
    let id = crate::sanitize::line(id);
    match error.status()? {
        404 => Some(format!(
            "no session {id} on this server (unknown id, or not yours)"
        )),
        409 => Some(format!(
            "session {id} is archived: it takes no more messages"
        )),
        400 => Some(format!("the server refused the message: {error}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries() {
        use Phase::{NeedsInput, PlanReady, Running as Working};
        use SessionStatus::{Idle, RequiresAction, Running};
        let cases = [
            (Running, Working, true, "is busy"),
            (RequiresAction, PlanReady, true, "A plan waits"),
            (RequiresAction, NeedsInput, false, "was waiting"),
            (Idle, NeedsInput, false, "was waiting"),
        ];
        for (status, phase, queued, says) in cases {
            let d = Delivery::new("s1", 7, status, phase);
            assert_eq!(d.queued, queued, "{status:?} {phase:?}");
            let sentence = d.sentence(phase);
            assert!(sentence.starts_with("Delivered to session s1 (event 7)."));
            assert!(sentence.contains(says), "{sentence}");
        }
    }

    #[test]
    fn the_json_shape_is_stable() {
        let delivery = Delivery::new("s1", 7, SessionStatus::Running, Phase::Running);
        insta::assert_json_snapshot!("message_json", delivery);
    }

    #[test]
    fn refusals() {
        let rejected = |status| ApiError::Rejected {
            status,
            code: "x".into(),
            message: "m".into(),
        };
        let cases = [
            (rejected(404), Some("no session s1")),
            (rejected(409), Some("session s1 is archived")),
            (rejected(400), Some("the server refused the message: m")),
            (rejected(403), None),
        ];
        for (error, want) in cases {
            let got = refusal("s1\u{7}", &error);
            match want {
                Some(start) => assert!(got.as_deref().unwrap().starts_with(start), "{got:?}"),
                None => assert_eq!(got, None),
            }
        }
    }
}
