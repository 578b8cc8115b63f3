//! The pieces of a launch that are not user interface: the create-session request built from a
//! prompt and a bundle; the bundle upload is `crate::upload`'s.

use ultraplan_protocol::api::CreateSessionRequest;
use ultraplan_protocol::events::{ControlRequest, ControlRequestEvent, EventBody, PermissionMode};
use ultraplan_protocol::session::{BaseRef, BundleManifest, SessionContext};

use crate::bundle::Bundle;

/// Longest session title derived from a prompt, in characters.
const MAX_TITLE: usize = 80;

/// The prompt sent when refining a draft without saying how.
pub const DEFAULT_REFINE_PROMPT: &str = "Refine the draft plan in the session context: check it against the code, fill the gaps, \
     and propose the improved plan.";

/// The title of a session: the first line of the prompt, whitespace collapsed, shortened.
pub fn title_for(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("ultraplan");
    let words: Vec<&str> = line.split_whitespace().collect();
    let line = words.join(" ");
    if line.chars().count() <= MAX_TITLE {
        return line;
    }
    let mut cut: String = line.chars().take(MAX_TITLE - 1).collect();
    cut.push('…');
    cut
}

/// The session context of a bundle: base commit and branch, dirtiness, the manifest.
pub fn session_context(bundle: &Bundle, draft_plan: Option<String>) -> SessionContext {
    let m = &bundle.manifest;
    SessionContext {
        base: BaseRef {
            commit: m.base_commit.clone(),
            branch: m.branch.clone(),
            dirty: !m.dirty_files.is_empty() || !m.untracked_files.is_empty(),
        },
        model: None,
        prompt_variant: None,
        repo: bundle
            .root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
        manifest: Some(BundleManifest {
            base_commit: m.base_commit.clone(),
            branch: m.branch.clone(),
            dirty_files: m.dirty_files.clone(),
            untracked_files: m.untracked_files.clone(),
            files: m.files,
            bytes: m.bytes,
        }),
        draft_plan,
        environment: None,
    }
}

/// `POST /v1/sessions` for `prompt` on an uploaded bundle: plan mode first, then the prompt.
pub fn create_request(
    prompt: &str,
    bundle: &Bundle,
    draft_plan: Option<String>,
) -> CreateSessionRequest {
    let set_mode = EventBody::ControlRequest(ControlRequestEvent {
        request_id: Some("set-permission-mode-plan".to_owned()),
        request: ControlRequest::SetPermissionMode {
            mode: PermissionMode::Plan,
            ultraplan: true,
        },
    });
    CreateSessionRequest {
        title: title_for(prompt),
        bundle_id: bundle.sha256.clone(),
        events: vec![set_mode, EventBody::user_text(prompt)],
        session_context: session_context(bundle, draft_plan),
    }
}

pub use crate::upload::{Progress, Upload, UploadError, upload};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::Manifest;

    fn bundle() -> Bundle {
        Bundle {
            root: "/work/repo".into(),
            sha256: "ab".repeat(32),
            encoding: crate::bundle::Codec::Gzip,
            manifest: Manifest {
                base_commit: Some("c0ffee".into()),
                branch: Some("main".into()),
                dirty_files: vec!["src/a.rs".into()],
                untracked_files: vec![],
                files: 3,
                bytes: 1234,
            },
            skipped: vec![],
            largest: vec![],
        }
    }

    #[test]
    fn the_request_has_plan_mode_then_the_prompt() {
        let req = create_request("fix the auth flow", &bundle(), Some("# draft".into()));
        let v = serde_json::to_value(&req).unwrap();
        assert_eq!(v["title"], "fix the auth flow");
        assert_eq!(v["bundle_id"], "ab".repeat(32));
        assert_eq!(v["events"][0]["type"], "control_request");
        assert_eq!(v["events"][0]["request"]["subtype"], "set_permission_mode");
        assert_eq!(v["events"][0]["request"]["mode"], "plan");
        assert_eq!(v["events"][0]["request"]["ultraplan"], true);
        assert_eq!(v["events"][1]["type"], "user");
        assert_eq!(v["events"][1]["message"]["content"], "fix the auth flow");
        let ctx = &v["session_context"];
        assert_eq!(ctx["base"]["commit"], "c0ffee");
        assert_eq!(ctx["base"]["branch"], "main");
        assert_eq!(ctx["base"]["dirty"], true);
        assert_eq!(ctx["repo"], "repo");
        assert_eq!(ctx["manifest"]["files"], 3);
        assert_eq!(ctx["draft_plan"], "# draft");
    }

    #[test]
    fn titles_are_one_short_line() {
        assert_eq!(title_for("\n  fix   the\tbug \nmore"), "fix the bug");
        let long = title_for(&"x".repeat(200));
        assert_eq!(long.chars().count(), MAX_TITLE);
        assert!(long.ends_with('…'));
    }
}
