//! Inline comments on a plan's passages: the request that adds one and the resource the API
//! returns (docs/ARCHITECTURE.md §3.2).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest comment body, in characters.
pub const MAX_COMMENT_BODY_CHARS: usize = 4000;
/// Longest quoted passage, in characters.
pub const MAX_COMMENT_QUOTE_CHARS: usize = 2000;
/// Most comments one plan revision may carry.
pub const MAX_COMMENTS_PER_PLAN: usize = 50;

/// `POST /v1/sessions/{id}/plans/{tool_use_id}/comments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewComment {
    /// The passage commented on, exactly as it appears in the plan text.
    pub quote: String,
    /// What the reviewer says about it.
    pub body: String,
}

/// The optional ExitPlanMode input in which the agent names the comments its revised plan
/// addresses (ids from the rejection it revises against).
pub const ADDRESSED_COMMENT_IDS: &str = "addressed_comment_ids";
/// What a rejection with comments asks the agent after listing them (the server writes it; an
/// agent may drop it from the feedback it acts on).
pub const ADDRESSED_REQUEST: &str = "When you submit the revised plan, list the ids of the \
comments it addresses in `addressed_comment_ids` (for example [\"cmt_1\"]); leave out any it \
does not address.";
/// Longest comment id the server keeps from an agent's list.
const MAX_COMMENT_ID_CHARS: usize = 64;

/// Where a comment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CommentState {
    /// On the current revision, waiting for the agent.
    Open,
    /// A newer revision of the plan exists and deals with it: the agent says so when
    /// `addressed_by` is `agent`; with `revision` the agent named no comments, so only the
    /// newer revision vouches for it.
    Addressed,
    /// The reviewer reopened it: it was carried over to a later revision as a new comment.
    Reopened,
}

impl CommentState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CommentState::Open => "open",
            CommentState::Addressed => "addressed",
            CommentState::Reopened => "reopened",
        }
    }
}

/// Who says an `addressed` comment was dealt with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AddressedBy {
    /// The agent named the comment in `addressed_comment_ids` of the next revision.
    Agent,
    /// The agent said nothing about which comments it addressed; a newer revision exists.
    Revision,
}

impl AddressedBy {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressedBy::Agent => "agent",
            AddressedBy::Revision => "revision",
        }
    }
}

/// The comment ids an ExitPlanMode `input` names in [`ADDRESSED_COMMENT_IDS`], as far as they
/// can be ids: strings of up to 64 ASCII letters, digits and underscores, repeats dropped, at
/// most [`MAX_COMMENTS_PER_PLAN`] of them. `None` when the input names none at all (the field
/// is missing or not a list): the agent said nothing. Whether an id is a comment on the
/// revised plan is for the reader to check; nothing here trusts it.
pub fn addressed_comment_ids(input: &Value) -> Option<Vec<String>> {
    let listed = input.get(ADDRESSED_COMMENT_IDS)?.as_array()?;
    let mut ids: Vec<String> = Vec::new();
    for id in listed.iter().filter_map(Value::as_str) {
        if id_shaped(id)
            && !ids.iter().any(|known| known == id)
            && ids.len() < MAX_COMMENTS_PER_PLAN
        {
            ids.push(id.to_owned());
        }
    }
    Some(ids)
}

/// Whether `id` can be a comment id: 1 to 64 ASCII letters, digits and underscores.
fn id_shaped(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_COMMENT_ID_CHARS
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The ids of the comments a rejection's tool_result lists, in order: the lines the server
/// writes as `N. [id] On "passage"…`.
pub fn listed_comment_ids(rejection: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for line in rejection.lines() {
        let rest = line.trim_start_matches(|c: char| c.is_ascii_digit());
        if rest.len() == line.len() {
            continue;
        }
        let Some((id, after)) = rest.strip_prefix(". [").and_then(|r| r.split_once(']')) else {
            continue;
        };
        if after.starts_with(" On \"") && id_shaped(id) {
            ids.push(id.to_owned());
        }
    }
    ids
}

/// One comment on a passage of one plan revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanComment {
    pub id: String,
    pub session_id: String,
    /// The ExitPlanMode call (plan revision) the comment is on.
    pub tool_use_id: String,
    /// The passage, verbatim.
    pub quote: String,
    /// The markdown headings above the passage, outermost first.
    pub heading_path: Vec<String>,
    pub body: String,
    /// The name of the user who wrote it.
    pub author: String,
    pub created_at: String,
    pub state: CommentState,
    /// For an `addressed` comment: whether the agent said so, or only a newer revision exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressed_by: Option<AddressedBy>,
    /// The comment this one reopens, from an earlier revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reopened_from: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn addressed_ids_are_read_shape_checked_and_never_more_than_a_plan_holds() {
        let many: Vec<String> = (0..80).map(|i| format!("cmt_{i}")).collect();
        let longest = "y".repeat(64);
        let cases: Vec<(Value, Option<Vec<&str>>)> = vec![
            (json!({"plan": "p"}), None),
            (json!({"plan": "p", "addressed_comment_ids": "cmt_a"}), None),
            (json!({"addressed_comment_ids": []}), Some(vec![])),
            (
                json!({"addressed_comment_ids": ["cmt_a", "cmt_b", "cmt_a"]}),
                Some(vec!["cmt_a", "cmt_b"]),
            ),
            (
                json!({"addressed_comment_ids": ["cmt_a", 3, null, "", "a b", "../x", "é"]}),
                Some(vec!["cmt_a"]),
            ),
            (
                json!({"addressed_comment_ids": ["x".repeat(65), "y".repeat(64)]}),
                Some(vec![longest.as_str()]),
            ),
        ];
        for (input, want) in cases {
            let want = want.map(|w| w.into_iter().map(String::from).collect::<Vec<_>>());
            assert_eq!(addressed_comment_ids(&input), want, "{input}");
        }
        let capped = addressed_comment_ids(&json!({ "addressed_comment_ids": many }));
        assert_eq!(capped.map(|ids| ids.len()), Some(MAX_COMMENTS_PER_PLAN));
    }

    #[test]
    fn a_rejection_lists_its_comment_ids() {
        let text = "Fix it.\n\nComments on the plan:\n1. [cmt_a] On \"x\" (under P):\n   body\n\
                    12. [cmt_b] On \"y\":\n   3. [cmt_c] On \"not a listed line\"\n\
                    2. [bad id] On \"z\":\n4. [cmt_d] Not a comment\n";
        assert_eq!(listed_comment_ids(text), ["cmt_a", "cmt_b"]);
        assert!(listed_comment_ids("just feedback").is_empty());
    }
}
