use std::path::Path;

use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::{ContentBlock, EventBody};
use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::patch::{Execution, ExecutionState, FileChange};
use ultraplan_protocol::plan_text::decision_tool_result;

use super::*;

fn write(root: &Path, path: &str, data: &[u8]) {
    let full = root.join(path);
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(full, data).expect("write");
}

fn bundle() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "src/lib.rs", b"fn one() {}\n");
    write(dir.path(), "README.md", b"hello\n");
    write(dir.path(), "old.txt", b"bye\n");
    write(dir.path(), ".gitignore", b"target/\n*.log\n");
    write(dir.path(), "kept.log", b"tracked though ignored\n");
    std::os::unix::fs::symlink("README.md", dir.path().join("link")).expect("symlink");
    dir
}

#[tokio::test]
async fn the_patch_is_the_change_of_the_tree_against_the_bundle() {
    let bundle = bundle();
    let root = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::at(root.path());
    assert!(!ws.is_prepared().await);
    ws.prepare(bundle.path(), None).await.expect("prepare");
    assert!(ws.is_prepared().await);
    assert!(
        !root.path().join("tree/.git").exists(),
        "git dir stays outside the tree"
    );
    let empty = ws.diff().await.expect("diff");
    assert!(empty.diff.is_empty() && empty.summary.is_empty());

    let tree = &ws.tree;
    write(tree, "src/lib.rs", b"fn one() {}\nfn two() {}\n");
    write(tree, "logo.png", &[0x89, b'P', b'N', b'G', 0, 1, 2, 255]);
    std::fs::remove_file(tree.join("old.txt")).expect("rm");
    write(tree, "target/debug/out", b"build output\n");
    write(tree, "new.log", b"ignored\n");
    write(tree, "kept.log", b"changed\n");
    std::fs::create_dir_all(tree.join(".git")).expect("agent-made .git");
    write(tree, ".git/HEAD", b"ref: refs/heads/evil\n");

    let patch = ws.diff().await.expect("diff");
    let files: Vec<(&str, FileChange, bool)> = patch
        .summary
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.change, f.binary))
        .collect();
    assert_eq!(
        files,
        vec![
            ("kept.log", FileChange::Modified, false),
            ("logo.png", FileChange::Added, true),
            ("old.txt", FileChange::Deleted, false),
            ("src/lib.rs", FileChange::Modified, false),
        ]
    );
    assert_eq!(patch.summary.additions, 2);
    assert_eq!(patch.summary.deletions, 2);
    let text = String::from_utf8_lossy(&patch.diff);
    assert!(text.contains("GIT binary patch"), "{text}");
    assert!(
        text.contains("diff --git a/src/lib.rs b/src/lib.rs"),
        "{text}"
    );

    // The patch applies to a copy of the bundle and reproduces the tree.
    let check = tempfile::tempdir().expect("tempdir");
    copy::copy_tree(bundle.path(), check.path()).expect("copy");
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(check.path())
        .status()
        .expect("git init");
    assert!(status.success());
    std::fs::write(check.path().join("p.diff"), &patch.diff).expect("write patch");
    let out = std::process::Command::new("git")
        .args(["apply", "p.diff"])
        .current_dir(check.path())
        .output()
        .expect("git apply");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for path in ["src/lib.rs", "logo.png", "kept.log"] {
        assert_eq!(
            std::fs::read(check.path().join(path)).expect("read"),
            std::fs::read(tree.join(path)).expect("read"),
            "{path}"
        );
    }
    assert!(!check.path().join("old.txt").exists());
}

#[tokio::test]
async fn preparing_again_starts_from_the_bundle() {
    let bundle = bundle();
    let root = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::at(root.path());
    ws.prepare(bundle.path(), None).await.expect("prepare");
    write(&ws.tree, "stray.txt", b"x\n");
    ws.prepare(bundle.path(), None)
        .await
        .expect("prepare again");
    assert!(!ws.tree.join("stray.txt").exists());
    assert!(ws.diff().await.expect("diff").summary.is_empty());
}

fn approved_log(plan: &str) -> Vec<EventBody> {
    let call = EventBody::assistant(vec![ContentBlock::ToolUse {
        id: "toolu_1".into(),
        name: "ExitPlanMode".into(),
        input: serde_json::json!({"plan": plan}),
        cache_control: None,
    }]);
    let decision = Decision::Approve { plan: None };
    let (text, is_error) = decision_tool_result(&decision, plan);
    let answer = EventBody::tool_result("toolu_1", text, is_error);
    vec![EventBody::user_text("do it"), call, answer]
}

#[test]
fn mode_follows_the_log_and_the_execution_state() {
    let approved = approved_log("1. edit");
    let pending = approved[..2].to_vec();
    let executing = Execution {
        state: ExecutionState::Executing,
        patch: None,
    };
    let finished = Execution {
        state: ExecutionState::Finished,
        patch: None,
    };
    let cases = [
        (&pending, None, true, AgentMode::Plan),
        (&approved, None, true, AgentMode::Execute),
        (&approved, Some(&executing), true, AgentMode::Execute),
        (&approved, Some(&finished), true, AgentMode::Plan),
        (&approved, None, false, AgentMode::Plan),
    ];
    for (log, execution, enabled, want) in cases {
        assert_eq!(
            mode_for(log, execution, enabled),
            want,
            "{execution:?} {enabled}"
        );
    }
}
