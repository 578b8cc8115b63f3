//! Remote execution end to end: the real client bundles a git repository and launches, the
//! fake Anthropic model plans and then, after approval, edits through Edit, Write and Bash in
//! the sandbox; the server's patch is pulled by the real client into fresh clones.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use serde_json::{Value, json};
use ultraplan_protocol::events::{Event, EventBody, ResultEvent};
use ultraplan_tests::fake_models::{FakeAnthropic, RecordedRequest, Reply, Script};
use ultraplan_tests::harness::{ServerProcess, plan_call, processes_mentioning, workspace_bin};

/// A shell project whose test fails until `add` adds.
const LIB: &str = "add() {\n  echo $(( $1 - $2 ))\n}\n";
const FIXED: &str = "add() {\n  echo $(( $1 + $2 ))\n}\n";
const TEST: &str = ". ./lib.sh\n[ \"$(add 2 3)\" = 5 ] || { echo 'FAIL: add 2 3'; exit 1; }\n\
[ \"$(cat notes/data.bin | od -An -tx1 | tr -d ' \\n')\" = 00ff0a01 ] || { echo 'FAIL: data'; exit 1; }\n\
echo 'all tests passed'\n";

/// The sandbox probes, each printing a verdict word. `host` is a host directory holding the
/// test's repositories.
fn probes(fake_port: u16, host: &Path, marker: &str) -> String {
    let host = host.display();
    format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{fake_port}) 2>/dev/null && echo NET_OPEN || echo NET_BLOCKED\n\
         if cat /etc/shadow >/dev/null 2>&1 || cat {host}/origin/lib.sh >/dev/null 2>&1 || ls /root >/dev/null 2>&1; \
         then echo HOST_VISIBLE; else echo HOST_HIDDEN; fi\n\
         touch /usr/{marker} 2>/dev/null && echo USR_WRITTEN || echo USR_REFUSED\n\
         echo x > /tmp/{marker} && echo TMP_PRIVATE_WRITE\n\
         echo x > ../{marker} 2>/dev/null && echo PARENT_WRITTEN || echo PARENT_REFUSED\n\
         mkdir -p {host}/{marker} 2>/dev/null; echo HOSTDIR_TRIED\n"
    )
}

/// Plans, then implements: fix, binary data, run the tests, probe the sandbox, a command
/// that never ends (killed at 1 s), then a summary.
fn script(fake_port: Arc<AtomicU16>, host: PathBuf, marker: String) -> Script {
    Script::from_fn(move |req: &RecordedRequest| {
        if req.is_verifier() {
            return match req.tool_results().len() {
                0 => Reply::tool_use("Bash", json!({"command": "sh test.sh"})),
                _ => Reply::text("Ran `sh test.sh`: exit code 0.\nVERDICT: PASS"),
            };
        }
        let fake_port = fake_port.load(Ordering::Relaxed);
        let executing = req.tool_names().iter().any(|t| t == "Bash");
        if !executing {
            return Reply::exit_plan_mode(
                "1. Make add() add in lib.sh\n2. Add notes/data.bin\n3. Run sh test.sh",
            );
        }
        // The approval is the first tool_result; every later one is an execution step.
        match req.tool_results().len() {
            1 => Reply::tool_use(
                "Edit",
                json!({"file_path": "lib.sh", "old_string": "$1 - $2", "new_string": "$1 + $2"}),
            ),
            2 => Reply::tool_use(
                "Bash",
                json!({"command": "mkdir -p notes && printf '\\000\\377\\n\\001' > notes/data.bin && ln -s /etc/shadow leak && ln -s ../.git notes/assets && ls -l notes"}),
            ),
            3 => Reply::tool_use("Bash", json!({"command": "sh test.sh"})),
            4 => Reply::tool_use(
                "Bash",
                json!({"command": probes(fake_port, &host, &marker)}),
            ),
            5 => Reply::tool_use(
                "Bash",
                json!({"command": "echo waiting forever; sleep 100000", "timeout": 1000}),
            ),
            6 => Reply::tool_use(
                "Write",
                json!({"file_path": "CHANGES.md", "content": "- add() adds\n"}),
            ),
            _ => Reply::text("Done: add() adds, data.bin added, all tests pass."),
        }
    })
}

pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A committed repository with no remote.
fn origin(root: &Path) -> PathBuf {
    let repo = root.join("origin");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("lib.sh"), LIB).expect("write");
    std::fs::write(repo.join("test.sh"), TEST).expect("write");
    std::fs::write(repo.join("README.md"), "# adder\n").expect("write");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    repo
}

fn clone(root: &Path, origin: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    git(root, &["clone", "-q", &origin.display().to_string(), name]);
    dir
}

/// The `ultraplan` client with its own HOME, talking to `server`.
pub(crate) fn client(server: &ServerProcess, home: &Path, cwd: &Path, args: &[&str]) -> Output {
    client_as(server, &server.token, home, cwd, args)
}

/// The real client run as the user `token` belongs to.
pub(crate) fn client_as(
    server: &ServerProcess,
    token: &str,
    home: &Path,
    cwd: &Path,
    args: &[&str],
) -> Output {
    std::process::Command::new(workspace_bin("ultraplan").expect("client"))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".state"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".data"))
        .env("ULTRAPLAN_SERVER", &server.base_url)
        .env("ULTRAPLAN_TOKEN", token)
        .output()
        .expect("run ultraplan")
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub(crate) fn bash_output(events: &[Event], needle: &str) -> String {
    events
        .iter()
        .flat_map(|e| e.body.tool_results())
        .map(|(_, text, _)| text)
        .find(|t| t.contains(needle))
        .unwrap_or_else(|| panic!("no tool result with {needle}"))
}

/// Wait for the session's first plan and approve it.
pub(crate) async fn approve_first_plan(server: &ServerProcess, id: &str, seen: &mut Vec<Event>) {
    let plan = server
        .wait_for(id, seen, |e| plan_call(e).is_some())
        .await
        .expect("plan");
    let (tool_use_id, _) = plan_call(&plan).expect("call");
    let code = server
        .decide(id, &tool_use_id, json!({"decision": "approve"}))
        .await
        .expect("approve");
    assert_eq!(code, 200);
}

/// Wait for the `result` that reports the execution's patch.
pub(crate) async fn wait_for_patch(
    server: &ServerProcess,
    id: &str,
    seen: &mut Vec<Event>,
) -> ResultEvent {
    let done = server
        .wait_for(id, seen, |e| patch_result(e).is_some())
        .await
        .expect("patch result");
    patch_result(&done).expect("result").clone()
}

fn patch_result(event: &Event) -> Option<&ResultEvent> {
    match &event.body {
        EventBody::Result(r) if r.patch.is_some() => Some(r),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_plans_run_remotely_in_bwrap_and_their_patch_applies_locally() {
    execute_and_pull("bwrap").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_plans_run_remotely_in_docker_and_their_patch_applies_locally() {
    execute_and_pull("docker").await;
}

async fn execute_and_pull(runner: &str) {
    let root = tempfile::tempdir().expect("tempdir");
    let marker = format!("escape-{}", std::process::id());
    let port = Arc::new(AtomicU16::new(0));
    let fake = FakeAnthropic::start(script(
        port.clone(),
        root.path().to_path_buf(),
        marker.clone(),
    ))
    .await;
    let url = reqwest::Url::parse(&fake.base_url()).expect("url");
    port.store(url.port().expect("port"), Ordering::Relaxed);
    let server = ServerProcess::with_fake_anthropic(runner, &fake.base_url())
        .await
        .expect("server");
    let home = root.path().join("home");
    let origin = origin(root.path());

    // Launch from the repository with the real client.
    let out = client(
        &server,
        &home,
        &origin,
        &[
            "launch",
            "--yes",
            "--json",
            "--no-watch",
            "ultraplan make add() add",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let session: Value = serde_json::from_slice(&out.stdout).expect("session json");
    let id = session["id"].as_str().expect("id").to_owned();
    let mut seen = Vec::new();
    // Approve: the plan runs remotely.
    approve_first_plan(&server, &id, &mut seen).await;
    let result = wait_for_patch(&server, &id, &mut seen).await;
    let summary = result.patch.clone().expect("summary");
    let files: Vec<&str> = summary.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        files,
        ["CHANGES.md", "lib.sh", "notes/data.bin"],
        "{result:?}"
    );
    assert!(summary.files[2].binary);
    // Symlinks the agent made out of the repository and into .git are refused, not carried.
    let refused: Vec<&str> = summary.left_out.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(refused, ["leak", "notes/assets"], "{result:?}");

    // The project's tests ran in the sandbox and passed.
    assert!(bash_output(&seen, "all tests passed").contains("all tests passed"));
    // The never-ending command was killed at its cap and the session went on.
    let forever = bash_output(&seen, "waiting forever");
    assert!(forever.contains("timed out"), "{forever}");
    // Probes from Bash: no network, no host files, no writes outside the workspace.
    let probe = bash_output(&seen, "HOSTDIR_");
    for verdict in [
        "NET_BLOCKED",
        "HOST_HIDDEN",
        "USR_REFUSED",
        "PARENT_REFUSED",
    ] {
        assert!(probe.contains(verdict), "{verdict} missing: {probe}");
    }
    assert!(!Path::new("/usr").join(&marker).exists());
    assert!(!Path::new("/tmp").join(&marker).exists());
    // The host directory (under /tmp, which the sandbox only has as a private tmpfs) is
    // untouched.
    assert!(
        !root.path().join(&marker).exists(),
        "the sandbox wrote a host directory"
    );
    let workspaces = server.data_dir.join("workspaces").join(&id);
    assert!(
        !workspaces.join(&marker).exists(),
        "write above the workspace"
    );
    let session = server.session(&id).await.expect("session");
    assert_eq!(session["execution"]["state"], "finished", "{session}");
    // The diff lives in the blob store (the data dir's by default), as long as the summary says.
    let blob = server
        .data_dir
        .join("blobs/patches")
        .join(format!("{id}.diff"));
    let stored = std::fs::metadata(&blob).expect("the patch's blob").len();
    assert_eq!(stored, summary.bytes, "{}", blob.display());
    let out = client(&server, &home, &origin, &["status", &id]);
    assert!(
        text(&out).contains(&format!(
            "Patch ready: 3 files changed, +2 −1. Apply it with `ultraplan pull {id}`"
        )),
        "{}",
        text(&out)
    );

    // A fresh clone of the same base: `ultraplan pull` applies the patch; its tests pass.
    let fresh = clone(root.path(), &origin, "fresh");
    let out = client(&server, &home, &fresh, &["pull", &id]);
    assert!(out.status.success(), "{}", text(&out));
    let report = text(&out);
    for path in files {
        assert!(report.contains(path), "{path} not in the report: {report}");
    }
    assert_eq!(
        std::fs::read_to_string(fresh.join("lib.sh")).expect("lib"),
        FIXED
    );
    assert_eq!(
        std::fs::read(fresh.join("notes/data.bin")).expect("data"),
        [0u8, 0xff, b'\n', 1]
    );
    let tests = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&fresh)
        .output()
        .expect("sh");
    assert!(tests.status.success(), "{}", text(&tests));

    // Conflict: the local file changed meanwhile. Preflight says so; nothing is touched.
    let busy = clone(root.path(), &origin, "busy");
    std::fs::write(busy.join("lib.sh"), "add() {\n  echo $(( $2 - $1 ))\n}\n").expect("edit");
    git(&busy, &["commit", "-qam", "local change"]);
    let before = (
        std::fs::read_to_string(busy.join("lib.sh")).expect("lib"),
        git(&busy, &["status", "--porcelain", "--untracked-files=all"]),
        git(&busy, &["rev-parse", "HEAD"]),
    );
    let out = client(&server, &home, &busy, &["pull", &id]);
    assert!(
        !out.status.success(),
        "a conflict must fail: {}",
        text(&out)
    );
    let report = text(&out);
    assert!(report.contains("conflict"), "{report}");
    let after = (
        std::fs::read_to_string(busy.join("lib.sh")).expect("lib"),
        git(&busy, &["status", "--porcelain", "--untracked-files=all"]),
        git(&busy, &["rev-parse", "HEAD"]),
    );
    assert_eq!(before, after, "the conflicting pull touched the checkout");
    assert!(!busy.join("CHANGES.md").exists());

    // The worktree path: a new branch at the base commit, where the patch applies.
    let out = client(&server, &home, &busy, &["pull", &id, "--worktree"]);
    assert!(out.status.success(), "{}", text(&out));
    let branches = git(&busy, &["branch", "--list", "ultraplan/*"]);
    assert!(branches.contains(&format!("ultraplan/{id}")), "{branches}");
    let worktree = worktree_of(&busy, &format!("ultraplan/{id}"));
    assert_eq!(
        std::fs::read_to_string(worktree.join("lib.sh")).expect("lib"),
        FIXED
    );
    let tests = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&worktree)
        .output()
        .expect("sh");
    assert!(tests.status.success(), "{}", text(&tests));
    assert_eq!(
        after.0,
        std::fs::read_to_string(busy.join("lib.sh")).expect("lib")
    );
}

/// The path of the worktree checked out on `branch`.
fn worktree_of(repo: &Path, branch: &str) -> PathBuf {
    let list = git(repo, &["worktree", "list", "--porcelain"]);
    let mut path = None;
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        }
        if line == format!("branch refs/heads/{branch}") {
            return path.expect("worktree path");
        }
    }
    panic!("no worktree on {branch}: {list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_planner_executes_nothing_and_says_why() {
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "offline"),
    ])
    .await
    .expect("server");
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    approve_first_plan(&server, &id, &mut seen).await;
    let result = wait_for_patch(&server, &id, &mut seen).await;
    assert!(result.patch.as_ref().is_some_and(|p| p.is_empty()));
    let text = result.result.clone().unwrap_or_default();
    assert!(text.contains("no changes"), "{text}");
    let said: Vec<String> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Result(r) => r.result.clone(),
            _ => None,
        })
        .collect();
    assert!(
        said.iter()
            .any(|t| t.contains("makes no edits") && t.contains("needs a model")),
        "{said:#?}"
    );
    let (code, body) = server
        .get(&format!("/v1/sessions/{id}/patch"))
        .await
        .expect("patch");
    // The raw answer of an empty patch is an empty body (not JSON).
    assert_eq!((code, body), (200, Value::Null));
}

/// Plans, writes `DONE.txt`, then starts a command that runs for minutes, then finishes.
fn slow_script() -> Script {
    Script::from_fn(|req: &RecordedRequest| {
        if req.is_verifier() {
            return Reply::text("DONE.txt is there.\nVERDICT: PASS");
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return Reply::exit_plan_mode("1. Write DONE.txt\n2. Run the slow job");
        }
        match req.tool_results().len() {
            1 => Reply::tool_use(
                "Write",
                json!({"file_path": "DONE.txt", "content": "written before the interruption\n"}),
            ),
            2 => Reply::tool_use(
                "Bash",
                json!({"command": "echo slow job started; sleep 600", "timeout": 600000}),
            ),
            _ => Reply::text("Done."),
        }
    })
}

/// Approve the session's plan and wait until the slow command runs.
async fn approve_and_reach_the_slow_command(
    server: &ServerProcess,
    seen: &mut Vec<Event>,
) -> String {
    let id = server
        .demo_session("write DONE.txt")
        .await
        .expect("session");
    approve_first_plan(server, &id, seen).await;
    server
        .wait_for(&id, seen, |e| {
            matches!(&e.body, EventBody::Assistant(a) if a.message.content.iter().any(
                |b| matches!(b, ultraplan_protocol::ContentBlock::ToolUse { name, .. } if name == "Bash")))
        })
        .await
        .expect("the slow command starts");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_resumes_an_execution_with_its_edits() {
    let fake = FakeAnthropic::start(slow_script()).await;
    let mut server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    let mut seen = Vec::new();
    let id = approve_and_reach_the_slow_command(&server, &mut seen).await;
    server.restart().await.expect("kill -9 and start again");
    let result = wait_for_patch(&server, &id, &mut seen).await;
    let files: Vec<String> = result
        .patch
        .iter()
        .flat_map(|p| p.files.iter().map(|f| f.path.clone()))
        .collect();
    assert_eq!(files, ["DONE.txt"], "{result:?}");
    assert!(
        result
            .result
            .as_deref()
            .unwrap_or("")
            .starts_with("Remote execution finished")
    );
    assert!(seen.iter().any(|e| matches!(&e.body,
        EventBody::System(s) if s.subtype == "resumed")));
    let interrupted = bash_output(&seen, "interrupted");
    assert!(
        !interrupted.contains("slow job started\n\nExit"),
        "{interrupted}"
    );
    let ids: Vec<i64> = seen.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "no gaps, no duplicates"
    );
    let (code, _) = server
        .get(&format!("/v1/sessions/{id}/patch"))
        .await
        .expect("patch");
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_past_its_time_limit_keeps_its_patch() {
    let fake = FakeAnthropic::start(slow_script()).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    server
        .admin(&["flags", "set", "timeout_seconds", "5", "--user", "tester"])
        .await
        .expect("flag");
    let mut seen = Vec::new();
    let id = approve_and_reach_the_slow_command(&server, &mut seen).await;
    server
        .wait_for(
            &id,
            &mut seen,
            |e| matches!(&e.body, EventBody::Result(r) if r.subtype == "error_timeout"),
        )
        .await
        .expect("timeout");
    let results: Vec<(String, Option<String>)> = seen
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Result(r) => Some((r.subtype.clone(), r.result.clone())),
            _ => None,
        })
        .collect();
    let [.., (patch_subtype, patch_text), (last, _)] = results.as_slice() else {
        panic!("{results:#?}");
    };
    assert_eq!(
        (patch_subtype.as_str(), last.as_str()),
        ("success", "error_timeout")
    );
    let patch_text = patch_text.clone().unwrap_or_default();
    assert!(
        patch_text.starts_with("Remote execution stopped early (the 5-second limit)"),
        "{patch_text}"
    );
    assert!(patch_text.contains("DONE.txt"), "{patch_text}");
    let session = server.session(&id).await.expect("session");
    assert_eq!(session["session_status"], "archived");
    assert_eq!(session["execution"]["state"], "finished");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_approved_after_its_agent_died_still_executes() {
    let script = Script::from_fn(|req: &RecordedRequest| {
        if req.is_verifier() {
            return Reply::text("DONE.txt is there.\nVERDICT: PASS");
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return Reply::exit_plan_mode("1. Write DONE.txt");
        }
        match req.tool_results().len() {
            1 => Reply::tool_use(
                "Write",
                json!({"file_path": "DONE.txt", "content": "done\n"}),
            ),
            _ => Reply::text("Done."),
        }
    });
    let fake = FakeAnthropic::start(script).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    let id = server
        .demo_session("write DONE.txt")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let plan = server
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("plan");
    let (tool_use_id, _) = plan_call(&plan).expect("call");
    // The planning agent dies while its plan waits for review.
    let needle = server.data_dir.join("bundles").display().to_string();
    for line in processes_mentioning(&needle) {
        if let Some(pid) = line.split_whitespace().next() {
            let _ = std::process::Command::new("kill")
                .args(["-9", pid])
                .status();
        }
    }
    server
        .wait_for(
            &id,
            &mut seen,
            |e| matches!(&e.body, EventBody::Result(r) if r.subtype == "error_during_execution"),
        )
        .await
        .expect("the crash is reported");
    let code = server
        .decide(&id, &tool_use_id, json!({"decision": "approve"}))
        .await
        .expect("approve");
    assert_eq!(code, 200);
    let session = server.session(&id).await.expect("session");
    assert_eq!(session["execution"]["state"], "executing", "{session}");
    // The approval starts an executing agent.
    let result = wait_for_patch(&server, &id, &mut seen).await;
    let files: Vec<&str> = result
        .patch
        .iter()
        .flat_map(|p| p.files.iter().map(|f| f.path.as_str()))
        .collect();
    assert_eq!(files, ["DONE.txt"]);
}
