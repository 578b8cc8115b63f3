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
    let (link, mut out) = RemoteLink::new("ci:r1");
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
    let (link, mut out) = RemoteLink::new("ci:r1");
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
    let (link, mut out) = RemoteLink::new("ci:r1");
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
    let (link, mut out) = RemoteLink::new("ci:r1");
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
    let (link, mut out) = RemoteLink::new("ci:r1");
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
        let (link, mut out) = RemoteLink::new("ci:r1");
        let process = launched(&link, &mut out, started(origin)).await.unwrap();
        let (_, _, _, control) = process.into_parts().unwrap();
        assert_eq!(control.fresh_remote_workspace(), fresh, "{origin:?}");
    }
}
