//! The offline model driven like the agent drives a model: tools run on an in-memory
//! repository, results go back, until ExitPlanMode; then a rejection and the revised plan.

use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::constants::TELEPORT_REPLY;
use ultraplan_protocol::events::{Role, ToolResultContent};
use ultraplan_protocol::model::{Message, StopReason};

use super::fake_repo::{Agent, FakeRepo, user_text};
use super::{APPROVED_REPLY, MODEL_NAME};

const ALL_TOOLS: &[&str] = &["Glob", "Grep", "Read", "TodoWrite", "ExitPlanMode"];

const REQUEST: &str = "ultraplan add rate limiting to the login endpoint";
const TERMS: &[&str] = &["rate", "limiting", "login", "endpoint"];
const FEEDBACK: &str = "Please add tests for the lockout after 5 failed attempts.\n\
                        Keep the change small.";

fn repo() -> FakeRepo {
    FakeRepo::new(&[
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/api\"]\nresolver = \"2\"\n",
        ),
        (
            "Cargo.lock",
            "# generated\n[[package]]\nname = \"login-rate-endpoint-limiting\"\n",
        ),
        (
            "README.md",
            "# Demo\n\nThe login endpoint opens a session.\n",
        ),
        (
            "crates/api/Cargo.toml",
            "[package]\nname = \"api\"\nversion = \"0.1.0\"\n",
        ),
        (
            "crates/api/src/lib.rs",
            "//! The HTTP API.\npub mod limits;\npub mod login;\npub mod routes;\n\
             pub mod session;\n",
        ),
        (
            "crates/api/src/limits.rs",
            "//! Rate limiting primitives: a token bucket per key.\n\n\
             /// Throttles login attempts per user.\n\
             pub struct RateLimiter {\n    capacity: u32,\n}\n",
        ),
        (
            "crates/api/src/login.rs",
            "//! The login endpoint: checks credentials and opens a session.\n\
             use crate::session::Session;\n\n\
             pub struct LoginRequest {\n    pub user: String,\n    pub password: String,\n}\n\n\
             /// POST /login: the login endpoint.\n\
             pub fn login(req: &LoginRequest) -> Result<Session, LoginError> {\n\
             \x20   if !verify(&req.user, &req.password) {\n\
             \x20       return Err(LoginError::BadCredentials);\n    }\n\
             \x20   Ok(Session::open(&req.user))\n}\n",
        ),
        (
            "crates/api/src/routes.rs",
            "// Each endpoint is registered here.\npub fn routes() -> Vec<(&'static str, &'static \
             str)> {\n    vec![(\"POST\", \"/login\"), (\"GET\", \"/health\")]\n}\n",
        ),
        (
            "crates/api/src/session.rs",
            "pub struct Session {\n    pub user: String,\n}\n",
        ),
        (
            "crates/api/tests/login.rs",
            "#[test]\nfn login_rejects_bad_password() {\n    \
             assert!(api::login::login(&bad()).is_err());\n}\n",
        ),
        (
            "web/package.json",
            r#"{"name":"web","scripts":{"test":"vitest run","build":"vite build"}}"#,
        ),
        (
            "web/src/login.ts",
            "export async function login(user: string, password: string) {\n  \
             return fetch(\"/login\", { method: \"POST\" });\n}\n",
        ),
    ])
}

/// Every `` `path:line` `` reference in the plan.
fn line_refs(plan: &str) -> Vec<(String, usize)> {
    plan.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|span| {
            let (path, line) = span.rsplit_once(':')?;
            let ok = !path.is_empty() && !path.contains(char::is_whitespace);
            ok.then_some((path.to_owned(), line.parse().ok()?))
        })
        .collect()
}

fn assert_refs_are_real(repo: &FakeRepo, plan: &str, terms: &[&str]) -> usize {
    let refs = line_refs(plan);
    for (path, number) in &refs {
        let text = repo
            .files
            .get(path)
            .unwrap_or_else(|| panic!("{path} is not in the repository"));
        let line = text
            .lines()
            .nth(number - 1)
            .unwrap_or_else(|| panic!("{path} has no line {number}"))
            .to_lowercase();
        assert!(
            terms.iter().any(|t| line.contains(t)),
            "{path}:{number} `{line}` contains none of {terms:?}"
        );
    }
    refs.len()
}

fn section<'p>(plan: &'p str, title: &str) -> &'p str {
    let start = plan
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("no section {title}"));
    let body = &plan[start + title.len() + 5..];
    let end = body.find("\n## ").unwrap_or(body.len());
    &body[..end]
}

#[test]
fn plans_then_revises_after_rejection() {
    let repo = repo();
    let mut agent = Agent::new(&repo, ALL_TOOLS, vec![ContentBlock::text(REQUEST)]);
    let (plan, plan_id) = agent.run_until_plan(10).expect("a plan");

    // Turn 1: two Globs; turn 2: Greps; turn 3: Reads and per-file Greps; turn 4: the plan.
    assert_eq!(agent.responses.len(), 4);
    let names = |n: usize| -> Vec<String> { agent.calls(n).into_iter().map(|c| c.1).collect() };
    assert_eq!(names(0), ["Glob", "Glob"]);
    assert_eq!(agent.calls(0)[1].0, "offline_t1_1");
    assert!(names(1).iter().all(|n| n == "Grep") && names(1).len() == 1 + TERMS.len());
    assert_eq!(agent.calls(1)[0].2["output_mode"], "files_with_matches");
    assert_eq!(agent.calls(1)[0].2["-i"], true);
    assert!(names(2).contains(&"Read".to_owned()) && names(2).contains(&"Grep".to_owned()));
    let reads: Vec<String> = agent
        .calls(2)
        .into_iter()
        .filter(|c| c.1 == "Read")
        .map(|c| c.2["file_path"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(reads.contains(&"Cargo.toml".to_owned()), "{reads:?}");
    assert!(reads.contains(&"web/package.json".to_owned()), "{reads:?}");
    assert!(!reads.contains(&"Cargo.lock".to_owned()), "{reads:?}");
    assert_eq!(plan_id, "offline_t4_0");
    for response in &agent.responses {
        assert_eq!(response.model, MODEL_NAME);
        assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
        assert!(response.usage.input_tokens > 0 && response.usage.output_tokens > 0);
        let ContentBlock::Text { text, .. } = &response.content[0] else {
            panic!("each turn opens with a labelled text");
        };
        assert!(
            text.starts_with("Offline planner (no model configured):"),
            "{text}"
        );
    }

    // The plan: labelled, structured, grounded in real lines, with the detected commands.
    let head = "# Plan: Add rate limiting to the login endpoint\n\n\
                *Written by the offline planner (no model configured)";
    assert!(plan.starts_with(head), "{plan}");
    let titles: Vec<&str> = plan.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        titles,
        [
            "## Goal",
            "## Relevant files",
            "## Steps",
            "## Tests",
            "## Risks"
        ]
    );
    assert!(assert_refs_are_real(&repo, &plan, TERMS) >= 3, "{plan}");
    let tests = section(&plan, "Tests");
    assert!(tests.contains("`cargo test --workspace`"), "{tests}");
    assert!(
        tests.contains("`cd web && npm test` (from `web/package.json`; runs `vitest run`)"),
        "{tests}"
    );
    assert!(!plan.contains("Cargo.lock"), "lockfiles are noise");
    assert!(section(&plan, "Steps").contains("crates/api/src/limits.rs"));
    insta::assert_snapshot!("first_plan", plan);

    // Rejected with feedback: one search for the feedback's terms, then the revised plan.
    agent.decide(&plan_id, FEEDBACK, true);
    let (revised, revised_id) = agent.run_until_plan(4).expect("a revised plan");
    assert_eq!(agent.responses.len(), 6);
    let search = agent.calls(4);
    assert_eq!(search.len(), 1);
    assert_eq!(search[0].1, "Grep");
    assert_eq!(search[0].2["output_mode"], "content");
    assert_eq!(revised_id, "offline_t6_0");
    let titles: Vec<&str> = revised.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        titles,
        [
            "## Goal",
            "## Relevant files",
            "## Steps",
            "## Tests",
            "## Risks",
            "## Revision 1"
        ]
    );
    let revision = section(&revised, "Revision 1");
    for line in FEEDBACK.lines() {
        assert!(
            revision.contains(&format!("> {line}")),
            "feedback quoted verbatim: {revision}"
        );
    }
    let steps = section(&revised, "Steps");
    assert!(
        steps.contains(
            "**Revision 1:** Address: Please add tests for the lockout after 5 failed attempts."
        ),
        "{steps}"
    );
    assert!(
        steps.contains("**Revision 1:** Address: Keep the change small."),
        "{steps}"
    );
    assert!(
        steps.contains("**Revision 1:** Add tests for what the feedback raises"),
        "{steps}"
    );
    let mut feedback_terms = TERMS.to_vec();
    feedback_terms.extend(["test", "lockout", "failed", "attempt", "small"]);
    assert_refs_are_real(&repo, &revised, &feedback_terms);
    insta::assert_snapshot!("revised_plan", revised);

    // A second rejection stacks a second revision; the first stays.
    agent.decide(&revised_id, "Also document the limit in the README.", true);
    let (third, third_id) = agent.run_until_plan(4).expect("a second revision");
    assert!(third.contains("## Revision 1\n") && third.contains("## Revision 2\n"));
    assert!(section(&third, "Revision 2").contains("> Also document the limit in the README."));

    // Approved: execution needs a model.
    agent.decide(
        &third_id,
        "User has approved your plan.\n\n## Approved Plan:\nP",
        false,
    );
    let response = agent.step();
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(response.content, [ContentBlock::text(APPROVED_REPLY)]);
}

#[test]
fn teleport_gets_the_teleport_reply() {
    let repo = repo();
    let mut agent = Agent::new(&repo, ALL_TOOLS, vec![ContentBlock::text(REQUEST)]);
    let (plan, id) = agent.run_until_plan(10).expect("a plan");
    agent.decide(&id, &format!("__ULTRAPLAN_TELEPORT_LOCAL__\n{plan}"), true);
    let response = agent.step();
    assert_eq!(response.content, [ContentBlock::text(TELEPORT_REPLY)]);
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
    // Asked again anyway: the same answer.
    agent.messages.push(user_text("what now?"));
    assert_eq!(agent.step().content, [ContentBlock::text(TELEPORT_REPLY)]);
}

#[test]
fn reminders_and_draft_plans_in_the_first_message() {
    let repo = repo();
    let first = vec![
        ContentBlock::text("<system-reminder>\nCLAUDE.md: never touch web/\n</system-reminder>"),
        ContentBlock::text(
            "ultraplan refine this plan for login rate limiting\n\n## Draft plan\n\
             1. Add a RateLimiter to the login handler\n2. Return 429 when exceeded",
        ),
    ];
    let mut agent = Agent::new(&repo, ALL_TOOLS, first);
    let (plan, _) = agent.run_until_plan(10).expect("a plan");
    assert!(!plan.contains("CLAUDE.md"), "reminders are not the request");
    let steps = section(&plan, "Steps");
    assert!(
        steps.contains("1. From the draft plan: Add a RateLimiter to the login handler"),
        "{steps}"
    );
    assert!(
        steps.contains("2. From the draft plan: Return 429 when exceeded"),
        "{steps}"
    );
    assert!(plan.starts_with("# Plan: Refine this plan for login rate limiting\n"));
    assert_refs_are_real(
        &repo,
        &plan,
        &[
            "ratelimiter",
            "login",
            "rate",
            "limiting",
            "handler",
            "exceeded",
        ],
    );
    insta::assert_snapshot!("draft_plan", plan);
}

#[test]
fn ask_user_answers_and_steering_continue_the_flow() {
    let repo = repo();
    let mut agent = Agent::new(&repo, ALL_TOOLS, vec![ContentBlock::text(REQUEST)]);
    agent.step();
    // The user's message arrives with the Glob results.
    let results: Vec<ContentBlock> = agent
        .calls(0)
        .into_iter()
        .map(|(id, name, input)| {
            let (text, is_error) = repo.run(&name, &input);
            ContentBlock::ToolResult {
                tool_use_id: id,
                content: ToolResultContent::Text(text),
                is_error: is_error.then_some(true),
                cache_control: None,
            }
        })
        .chain([ContentBlock::text("Answer: per user, not per IP.")])
        .collect();
    agent.messages.push(Message {
        role: Role::User,
        content: results,
    });
    let (plan, _) = agent.run_until_plan(10).expect("a plan");
    assert_eq!(agent.responses.len(), 4, "the flow went on where it was");
    assert!(
        section(&plan, "Goal").contains("> Answer: per user, not per IP."),
        "{plan}"
    );
}
