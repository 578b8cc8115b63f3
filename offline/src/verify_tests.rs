//! The offline planner's answers to the verifier.

use serde_json::Value;
use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::events::{Role, ToolResultContent};
use ultraplan_protocol::model::{Message, StopReason, SystemBlock};
use ultraplan_protocol::verdict::{VerdictOutcome, parse_verdict};

use super::*;
use crate::fake_repo::{Agent, FakeRepo, request, tools};
use crate::offline_turn;

const VERIFIER_TOOLS: [&str; 4] = ["Glob", "Grep", "Read", "Bash"];
const BRIEF: &str = "Verify the implementation of this approved plan.\n\n<approved_plan>\n1. Add \
greet().\n</approved_plan>";

/// Plays the agent around the verifier: Read/Glob/Grep on `repo`, Bash from `bash` (command →
/// output, is_error; anything else "not found"). Returns the final text and every call made,
/// turn by turn.
fn verify(
    repo: &FakeRepo,
    tool_names: &[&str],
    bash: &[(&str, &str, bool)],
) -> (String, Vec<Vec<(String, Value)>>) {
    let mut agent = Agent::new(repo, tool_names, vec![ContentBlock::text(BRIEF)]);
    let mut turns = Vec::new();
    for _ in 0..5 {
        let response = agent.step();
        let mut calls = Vec::new();
        let mut results = Vec::new();
        for block in &response.content {
            let ContentBlock::ToolUse {
                id, name, input, ..
            } = block
            else {
                continue;
            };
            calls.push((name.clone(), input.clone()));
            let (text, is_error) = if name == "Bash" {
                let command = input["command"].as_str().unwrap_or_default();
                bash.iter()
                    .find(|(c, _, _)| *c == command)
                    .map(|(_, out, err)| ((*out).to_owned(), *err))
                    .unwrap_or_else(|| ("sh: not found\n\nExit code 127".to_owned(), true))
            } else {
                repo.run(name, input)
            };
            results.push(ContentBlock::ToolResult {
                tool_use_id: id.clone(),
                content: ToolResultContent::Text(text),
                is_error: is_error.then_some(true),
                cache_control: None,
            });
        }
        if results.is_empty() {
            assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
            let text = response
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n");
            return (text, turns);
        }
        turns.push(calls);
        agent.messages.push(Message {
            role: Role::User,
            content: results,
        });
    }
    panic!("the verifier never answered");
}

fn names(turns: &[Vec<(String, Value)>]) -> Vec<Vec<String>> {
    turns
        .iter()
        .map(|t| {
            t.iter()
                .map(|(name, input)| match input["command"].as_str() {
                    Some(cmd) => format!("{name}: {cmd}"),
                    None => format!("{name}: {}", input["file_path"].as_str().unwrap_or("")),
                })
                .collect()
        })
        .collect()
}

/// A repository, the Bash outputs, the calls turn by turn, the verdict and needles in its
/// evidence.
type Case<'r> = (
    &'r FakeRepo,
    Vec<(&'static str, &'static str, bool)>,
    Vec<Vec<String>>,
    VerdictOutcome,
    Vec<&'static str>,
);

const ENV: &str = "[setup]\ncommands = [\"pip install -e .\"]\n\n[verify]\n# the checks\ncommands = [\n  \
\"sh test.sh\",  # unit tests\n  'sh lint.sh',\n]\ntimeout_seconds = 600\n";

#[test]
fn it_runs_the_verify_commands_and_gives_a_verdict() {
    let with_env = FakeRepo::new(&[(ENVIRONMENT_FILE, ENV), ("test.sh", "exit 0")]);
    let no_verify = FakeRepo::new(&[(ENVIRONMENT_FILE, "[setup]\ncommands = [\"make\"]\n")]);
    let empty = FakeRepo::new(&[(ENVIRONMENT_FILE, "[verify]\ncommands = []\n")]);
    let bare = FakeRepo::new(&[("README.md", "hi")]);
    let read = vec!["Read: .ultraplan/environment.toml".to_owned()];
    let both = vec!["Bash: sh test.sh".to_owned(), "Bash: sh lint.sh".to_owned()];
    let failing_output =
        "running 3 tests\nok a\nok b\nFAIL login_rejects_blank_names\n\nExit code 1";
    let cases: Vec<Case<'_>> = vec![
        (
            &with_env,
            vec![
                ("sh test.sh", "3 passed", false),
                ("sh lint.sh", "(no output)", false),
            ],
            vec![read.clone(), both.clone()],
            VerdictOutcome::Pass,
            vec!["- `sh test.sh`: exit code 0\n- `sh lint.sh`: exit code 0\n"],
        ),
        (
            &with_env,
            vec![
                ("sh test.sh", failing_output, true),
                ("sh lint.sh", "ok", false),
            ],
            vec![read.clone(), both],
            VerdictOutcome::Fail,
            vec![
                "- `sh test.sh`: exit code 1\n- `sh lint.sh`: exit code 0\n",
                "Failing command: `sh test.sh` (exit code 1)",
                "ok b\nFAIL login_rejects_blank_names\n```",
            ],
        ),
        (
            &no_verify,
            vec![],
            vec![read.clone()],
            VerdictOutcome::Partial,
            vec!["no test command was configured"],
        ),
        (
            &empty,
            vec![],
            vec![read.clone()],
            VerdictOutcome::Partial,
            vec!["no test command was configured"],
        ),
        (
            &bare,
            vec![],
            vec![read],
            VerdictOutcome::Partial,
            vec!["no test command was configured", "Nothing was run"],
        ),
    ];
    for (i, (repo, bash, calls, outcome, needles)) in cases.into_iter().enumerate() {
        let (text, turns) = verify(repo, &VERIFIER_TOOLS, &bash);
        assert_eq!(names(&turns), calls, "case {i}");
        assert!(text.starts_with(LABEL), "case {i}: {text}");
        assert!(!text.contains("Exit code"), "case {i}: {text}");
        let verdict = parse_verdict(&text).expect("a verdict line");
        assert_eq!(verdict.verdict, outcome, "case {i}: {text}");
        assert!(
            text.ends_with(&format!("VERDICT: {}", outcome.as_str())),
            "{text}"
        );
        for needle in needles {
            assert!(
                verdict.evidence.contains(needle),
                "case {i}: {needle:?} in {text}"
            );
        }
    }
}

#[test]
fn a_timed_out_command_fails_and_is_quoted() {
    let repo = FakeRepo::new(&[(ENVIRONMENT_FILE, "[verify]\ncommands = \"sh slow.sh\"\n")]);
    let timed_out = "Command timed out after 120000 ms and was killed.\n\nstill going";
    let (text, _) = verify(&repo, &VERIFIER_TOOLS, &[("sh slow.sh", timed_out, true)]);
    assert!(text.contains("- `sh slow.sh`: no exit code"), "{text}");
    assert!(text.contains("still going"), "{text}");
    assert!(text.ends_with("VERDICT: FAIL"), "{text}");
}

#[test]
fn the_verifier_is_told_apart_from_the_planner_and_the_executor() {
    let repo = FakeRepo::new(&[(ENVIRONMENT_FILE, ENV)]);
    let first = vec![Message {
        role: Role::User,
        content: vec![ContentBlock::text(BRIEF)],
    }];
    let first_call = |tool_names: &[&str], system: &str| {
        let mut req = request(first.clone(), tools(tool_names));
        if !system.is_empty() {
            req.system = vec![SystemBlock::text(system)];
        }
        let response = offline_turn(&req);
        response.content.iter().find_map(|b| match b {
            ContentBlock::ToolUse { name, input, .. } => Some(format!(
                "{name} {}",
                input["file_path"].as_str().unwrap_or("")
            )),
            _ => None,
        })
    };
    let env_read = Some(format!("Read {ENVIRONMENT_FILE}"));
    assert_eq!(first_call(&VERIFIER_TOOLS, ""), env_read);
    assert_eq!(
        first_call(
            &["Glob", "Grep", "Read"],
            "… end with VERDICT: PASS, VERDICT: FAIL or VERDICT: PARTIAL"
        ),
        env_read,
        "recognised by its prompt"
    );
    assert_ne!(
        first_call(&["Glob", "Grep", "Read", "Write", "Edit", "Bash"], ""),
        env_read
    );
    assert_ne!(
        first_call(&["Glob", "Grep", "Read", "ExitPlanMode"], ""),
        env_read
    );

    // Recognised by its prompt without Bash, it cannot run what it found.
    let mut req = request(first.clone(), tools(&["Read"]));
    req.system = vec![SystemBlock::text(VERDICT_MARK)];
    let read = offline_turn(&req);
    let (id, input) = read
        .content
        .iter()
        .find_map(|b| match b {
            ContentBlock::ToolUse { id, input, .. } => Some((id.clone(), input.clone())),
            _ => None,
        })
        .expect("a Read call");
    let (env, is_error) = repo.run("Read", &input);
    req.messages.push(Message {
        role: Role::Assistant,
        content: read.content,
    });
    req.messages
        .push(crate::fake_repo::tool_result(&id, &env, is_error));
    let text = match &offline_turn(&req).content[..] {
        [ContentBlock::Text { text, .. }] => text.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        text.contains("none could run") && text.ends_with("VERDICT: PARTIAL"),
        "{text}"
    );
}

#[test]
fn verify_commands_are_read_from_the_verify_table_only() {
    let cases: [(&str, &[&str]); 7] = [
        (ENV, &["sh test.sh", "sh lint.sh"]),
        (
            "[verify]\ncommands = [\"a \\\"quoted\\\" b\", 'c # not a comment']",
            &["a \"quoted\" b", "c # not a comment"],
        ),
        ("[verify] # checks\ncommands=\"make test\"", &["make test"]),
        (
            "[verify]\ncommands = [ \"x]\",\n\"y\" ]\n[other]\ncommands = [\"z\"]",
            &["x]", "y"],
        ),
        ("[verify.extra]\ncommands = [\"no\"]", &[]),
        ("commands = [\"top level\"]\n[verify]\ntimeout = 3", &[]),
        ("", &[]),
    ];
    for (toml, want) in cases {
        assert_eq!(verify_commands(toml), want, "{toml}");
    }
    let read_output = "     1\t[verify]\n     2\tcommands = [\"make\"]";
    assert_eq!(verify_commands(&strip_line_numbers(read_output)), ["make"]);
}
