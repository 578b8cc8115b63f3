use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use ultraplan_protocol::runner::{
    AgentRef, ControlMessage, LaunchSpec, RunnerMessage, WorkspaceOrigin,
};

use super::*;

fn agent(epoch: i64) -> AgentRef {
    AgentRef {
        session_id: "s1".to_owned(),
        epoch,
    }
}

fn spec() -> LaunchSpec {
    LaunchSpec {
        bundle_id: "b".repeat(64),
        writable: false,
        log_filter: None,
        ..LaunchSpec::default()
    }
}

fn started(workspace: Option<WorkspaceOrigin>) -> RunnerMessage {
    RunnerMessage::Started {
        agent: agent(1),
        workspace,
    }
}

/// Launch on `link`, answering the runner's side with `answer` once the launch was asked.
async fn launched(
    link: &RemoteLink,
    out: &mut mpsc::UnboundedReceiver<ControlMessage>,
    answer: RunnerMessage,
) -> Result<AgentProcess, SandboxError> {
    let launching = link.launch(agent(1), spec());
    let answering = async {
        let asked = out.recv().await;
        assert!(
            matches!(asked, Some(ControlMessage::Launch { .. })),
            "{asked:?}"
        );
        link.dispatch(answer);
    };
    let (process, ()) = tokio::join!(launching, answering);
    process
}

#[tokio::test]
async fn a_remote_agent_relays_stdio_and_exits_as_the_runner_says() {
    let (link, mut out) = RemoteLink::new("ci:r1", &[]);
    let process = launched(&link, &mut out, started(None)).await.unwrap();
    let (mut stdin, stdout, _stderr, mut control) = process.into_parts().unwrap();
    link.dispatch(RunnerMessage::Stdout {
        agent: agent(1),
        line: r#"{"type":"heartbeat"}"#.to_owned(),
    });
    stdin.write_all(b"{\"type\":\"stop\"}\n").await.unwrap();
    let relayed = out.recv().await;
    assert_eq!(
        relayed,
        Some(ControlMessage::Stdin {
            agent: agent(1),
            line: r#"{"type":"stop"}"#.to_owned()
        })
    );
    link.dispatch(RunnerMessage::Exited {
        agent: agent(1),
        success: true,
        description: "exit status: 0".to_owned(),
        blocked: vec![],
        blocked_beyond: 0,
    });
    let mut lines = BufReader::new(stdout).lines();
    assert_eq!(
        lines.next_line().await.unwrap().as_deref(),
        Some(r#"{"type":"heartbeat"}"#)
    );
    assert_eq!(
        lines.next_line().await.unwrap(),
        None,
        "stdout ends with the agent"
    );
    let exit = control.wait().await.unwrap();
    assert!(exit.success);
    assert_eq!(link.agents(), 0);
}

#[tokio::test]
async fn messages_of_a_lease_not_held_are_refused_and_the_agent_killed() {
    let (link, mut out) = RemoteLink::new("ci:r1", &[]);
    link.dispatch(RunnerMessage::Stdout {
        agent: agent(7),
        line: "{}".to_owned(),
    });
    match out.recv().await {
        Some(ControlMessage::Kill { agent: killed, .. }) => assert_eq!(killed, agent(7)),
        other => panic!("expected a kill, got {other:?}"),
    }
}

#[tokio::test]
async fn a_launch_the_runner_refuses_is_a_spawn_error_with_its_reason() {
    let (link, mut out) = RemoteLink::new("ci:r1", &[]);
    let refused = RunnerMessage::LaunchFailed {
        agent: agent(1),
        reason: "bundle refused: sha256 mismatch".to_owned(),
    };
    let error = launched(&link, &mut out, refused).await.err().unwrap();
    assert!(error.to_string().contains("sha256 mismatch"), "{error}");
    assert_eq!(link.agents(), 0);
}

#[tokio::test]
async fn a_lost_link_ends_every_agent_on_it() {
    let (link, mut out) = RemoteLink::new("ci:r1", &[]);
    let process = launched(&link, &mut out, started(None)).await.unwrap();
    let (_stdin, _stdout, _stderr, mut control) = process.into_parts().unwrap();
    link.close();
    let exit = control.wait().await.unwrap();
    assert!(!exit.success);
    assert!(exit.description.contains("link was lost"), "{exit:?}");
    assert!(link.is_closed());
    assert!(
        !link.send(ControlMessage::Heartbeat {}),
        "nothing is sent on a closed link"
    );
}

#[tokio::test]
async fn a_patch_is_kept_for_the_task_and_oversized_ones_refused() {
    let (link, mut out) = RemoteLink::new("ci:r1", &[]);
    let process = launched(&link, &mut out, started(None)).await.unwrap();
    let (_stdin, _stdout, _stderr, mut control) = process.into_parts().unwrap();
    let summary = ultraplan_protocol::patch::PatchSummary {
        files: Vec::new(),
        additions: 0,
        deletions: 0,
        bytes: 0,
        base_commit: None,
        left_out: Vec::new(),
        verdict: None,
    };
    link.dispatch(RunnerMessage::Patch {
        agent: agent(1),
        diff_base64: "A".repeat(MAX_REMOTE_PATCH_BYTES / 3 * 4 + 8),
        summary,
    });
    link.dispatch(RunnerMessage::Exited {
        agent: agent(1),
        success: true,
        description: String::new(),
        blocked: vec![],
        blocked_beyond: 0,
    });
    control.wait().await;
    let patch = control
        .take_remote_patch()
        .expect("the runner's word is kept");
    assert!(patch.unwrap_err().contains("larger than"));
}

#[tokio::test]
async fn a_launch_says_whether_the_runner_made_its_copy_fresh() {
    let cases = [
        (None, false),
        (Some(WorkspaceOrigin::Kept), false),
        (Some(WorkspaceOrigin::Fresh), true),
    ];
    for (origin, fresh) in cases {
        let (link, mut out) = RemoteLink::new("ci:r1", &[]);
        let process = launched(&link, &mut out, started(origin)).await.unwrap();
        let (_, _, _, control) = process.into_parts().unwrap();
        assert_eq!(control.fresh_remote_workspace(), fresh, "{origin:?}");
    }
}

fn prepare_spec(secret: &str) -> ultraplan_protocol::runner::EnvironmentSpec {
    use ultraplan_protocol::runner::{EnvironmentSpec, PreparePhase, SecretValues};
    EnvironmentSpec {
        phase: PreparePhase::Setup,
        bundle_id: "b".repeat(64),
        definition: "[setup]\n".to_owned(),
        lock_files: vec![],
        scope: "u1".to_owned(),
        secrets: SecretValues([("TOKEN".to_owned(), secret.to_owned())].into()),
        timeout_seconds: 60,
        log_filter: None,
    }
}

fn environments_link() -> (RemoteLink, mpsc::UnboundedReceiver<ControlMessage>) {
    let features = [ultraplan_protocol::runner::FEATURE_ENVIRONMENTS.to_owned()];
    RemoteLink::new("ci:r1", &features)
}

#[tokio::test]
async fn only_runners_that_say_so_prepare_environments() {
    assert!(!RemoteLink::new("ci:r1", &[]).0.prepares_environments());
    assert!(environments_link().0.prepares_environments());
}

#[tokio::test]
async fn a_prepare_streams_masked_capped_output_then_its_outcome() {
    use ultraplan_protocol::runner::{EnvironmentOutcome, RunEnd, RunReport};
    let (link, mut out) = environments_link();
    let (lines_tx, mut lines) = mpsc::unbounded_channel();
    let preparing = link.prepare(agent(1), prepare_spec("tok-s3cr3t"), lines_tx);
    let runner = async {
        let asked = out.recv().await;
        assert!(
            matches!(&asked, Some(ControlMessage::Prepare { spec, .. }) if spec.secrets.0["TOKEN"] == "tok-s3cr3t"),
            "{asked:?}"
        );
        // A runner that masks nothing and floods: the server masks and caps.
        link.dispatch(RunnerMessage::EnvironmentOutput {
            agent: agent(1),
            lines: vec!["token tok-s3cr3t\u{1b}[2J".to_owned(), "x".repeat(100_000)],
        });
        link.dispatch(RunnerMessage::EnvironmentOutput {
            agent: agent(1),
            lines: (0..MAX_PREPARE_LINES + 10).map(|i| i.to_string()).collect(),
        });
        link.dispatch(RunnerMessage::EnvironmentDone {
            agent: agent(1),
            outcome: EnvironmentOutcome::Failed {
                report: RunReport {
                    end: RunEnd::TimedOut,
                    duration_ms: 5,
                    blocked: vec![],
                    blocked_beyond: 0,
                    tail: vec!["still tok-s3cr3t".to_owned()],
                },
            },
        });
    };
    let (outcome, ()) = tokio::join!(preparing, runner);
    let Ok(EnvironmentOutcome::Failed { report }) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(report.tail, ["still ***"]);
    assert_eq!(lines.recv().await.as_deref(), Some("token ***[2J"));
    assert!(lines.recv().await.unwrap().len() < 4096);
    let mut rest = Vec::new();
    while let Some(line) = lines.recv().await {
        rest.push(line);
    }
    assert_eq!(
        rest.len(),
        ultraplan_protocol::runner::MAX_ENVIRONMENT_LINES_PER_MESSAGE + 1,
        "one message carries a bounded number of lines"
    );
    assert!(
        rest.last()
            .unwrap()
            .contains("more lines of output were dropped")
    );
}

#[tokio::test]
async fn news_of_a_prepare_not_waited_for_is_refused_and_a_lost_link_ends_the_wait() {
    use ultraplan_protocol::runner::EnvironmentOutcome;
    let (link, mut out) = environments_link();
    link.dispatch(RunnerMessage::EnvironmentDone {
        agent: agent(9),
        outcome: EnvironmentOutcome::Gone {},
    });
    match out.recv().await {
        Some(ControlMessage::Kill { agent: killed, .. }) => assert_eq!(killed, agent(9)),
        other => panic!("expected a kill, got {other:?}"),
    }
    let (lines_tx, _lines) = mpsc::unbounded_channel();
    let preparing = link.prepare(agent(1), prepare_spec("v"), lines_tx);
    let closing = async {
        let _ = out.recv().await;
        link.close();
    };
    let (outcome, ()) = tokio::join!(preparing, closing);
    assert!(outcome.unwrap_err().contains("link was lost"));
}

#[tokio::test]
async fn a_held_snapshot_is_released_when_dropped_and_odd_keys_refused() {
    use ultraplan_protocol::runner::SnapshotInfo;
    let (link, mut out) = environments_link();
    let info = SnapshotInfo {
        key: "a".repeat(64),
        built_at_ms: 1,
        setup_ms: 2,
        generation: 0,
        base_image: None,
    };
    let held = link.snapshot(&agent(1), &info).expect("plain key");
    drop(held);
    assert_eq!(
        out.recv().await,
        Some(ControlMessage::Release { agent: agent(1) })
    );
    let odd = SnapshotInfo {
        key: "../etc".to_owned(),
        ..info
    };
    assert!(link.snapshot(&agent(1), &odd).is_none());
    assert_eq!(
        out.recv().await,
        Some(ControlMessage::Release { agent: agent(1) }),
        "the runner lets go of what the server will not use"
    );
}
