//! The binary's contract at its edges: `--version`, protocol violations, and the exact first
//! model request (snapshots).

use std::process::Command;

use ultraplan_protocol::frames::{AgentFrame, ServerFrame};
use ultraplan_protocol::session::PromptVariant;

use super::support::{AgentProcess, bundle, new_session, settings};
use super::{PROMPT, start};

#[test]
fn version_goes_to_stderr() {
    let out = Command::new(env!("CARGO_BIN_EXE_ultraplan-agent"))
        .arg("--version")
        .output()
        .expect("run");
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        format!("ultraplan-agent {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn protocol_violations_exit_with_code_2() {
    let oversized = format!("\"{}\"", "x".repeat(8 * 1024 * 1024 + 10));
    let cases: [(&str, Vec<String>, &str); 4] = [
        (
            "malformed",
            vec!["this is not json".into()],
            "malformed frame",
        ),
        (
            "version",
            vec![r#"{"type":"hello","protocol_version":99}"#.into()],
            "version mismatch",
        ),
        (
            "eof",
            vec![r#"{"type":"hello","protocol_version":1}"#.into()],
            "closed the agent's stdin",
        ),
        ("oversized", vec![oversized], "frame over"),
    ];
    for (name, lines, reason) in cases {
        let repo = bundle();
        let mut agent = AgentProcess::spawn(repo.path(), &[]);
        assert!(
            matches!(agent.next_frame(), AgentFrame::Hello { .. }),
            "{name}"
        );
        for line in &lines {
            agent.send_raw(line);
        }
        agent.close_stdin();
        let (code, stderr) = agent.exit_and_stderr();
        assert_eq!(code, 2, "{name}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("ultraplan-agent: handshake failed:"),
            "{name}: {last}"
        );
        assert!(last.contains(reason), "{name}: {last}");
    }
}

#[test]
fn malformed_frame_after_start_exits_with_code_2() {
    let (_repo, mut agent) = start(PromptVariant::SimplePlan);
    let _ = agent.expect_request();
    agent.send_raw("{\"type\":\"model_response\"}");
    let (code, stderr) = agent.exit_and_stderr();
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("protocol error: malformed frame"),
        "{stderr}"
    );
}

#[test]
fn first_requests_match_snapshots() {
    let cases = [
        ("first_request_simple_plan", PromptVariant::SimplePlan, None),
        ("first_request_visual_plan", PromptVariant::VisualPlan, None),
        (
            "first_request_three_subagents_with_critique",
            PromptVariant::ThreeSubagentsWithCritique,
            None,
        ),
        (
            "first_request_draft_plan",
            PromptVariant::SimplePlan,
            Some("1. Trim the name.\n2. Reject empty names."),
        ),
    ];
    for (name, variant, draft) in cases {
        let repo = bundle();
        let mut agent = AgentProcess::spawn(repo.path(), &[]);
        agent.open(settings(variant, draft), new_session(PROMPT));
        let (id, request, events) = agent.expect_request();
        assert_eq!(id, "req_1");
        assert!(events.is_empty());
        let text = serde_json::to_string(&request).expect("json");
        assert!(
            !text.to_lowercase().contains("ultraplan"),
            "{name} names the product"
        );
        insta::assert_json_snapshot!(name, request);
        agent.send(&ServerFrame::Stop {
            reason: "test".into(),
        });
        agent.until_done();
        assert_eq!(agent.wait(), 0);
    }
}
