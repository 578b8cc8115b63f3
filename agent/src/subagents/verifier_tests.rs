//! The verifier's prompts, tools, brief and change tracking.

use serde_json::json;

use super::*;
use crate::subagents::filter;

const EXECUTION_TOOLS: [&str; 7] = ["Glob", "Grep", "Read", "Write", "Edit", "Bash", "TodoWrite"];

fn offered() -> Vec<ToolDefinition> {
    EXECUTION_TOOLS
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).to_owned(),
            description: format!("{name} tool"),
            input_schema: json!({"type": "object"}),
            cache_control: None,
        })
        .collect()
}

#[test]
fn system_prompt_matches_snapshot() {
    let names: Vec<String> = EXECUTION_TOOLS.map(String::from).to_vec();
    let allowed = filter::allowed(&names, Some(&definition()), false);
    let prefix = prefix(&offered(), &allowed);
    assert_eq!(prefix.system.len(), 2);
    assert!(prefix.system.iter().all(|b| b.cache_control.is_some()));
    let text: Vec<&str> = prefix.system.iter().map(|b| b.text.as_str()).collect();
    insta::assert_snapshot!(
        "verifier_system_prompt",
        text.join("\n\n----- block -----\n\n")
    );
}

#[test]
fn it_gets_read_grep_glob_and_bash_only() {
    let names: Vec<String> = EXECUTION_TOOLS.map(String::from).to_vec();
    let def = definition();
    for plan_mode in [false, true] {
        let allowed = filter::allowed(&names, Some(&def), plan_mode);
        let want: &[&str] = if plan_mode {
            &["Glob", "Grep", "Read"]
        } else {
            &["Glob", "Grep", "Read", "Bash"]
        };
        assert_eq!(allowed, want, "plan mode {plan_mode}");
    }
    let allowed = filter::allowed(&names, Some(&def), false);
    let tools: Vec<String> = prefix(&offered(), &allowed)
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(tools, ["Glob", "Grep", "Read", "Bash"]);
    assert!(
        !crate::subagents::Catalog::new(vec![])
            .agents()
            .iter()
            .any(|a| a.name == NAME),
        "the model cannot start a verifier"
    );
}

#[test]
fn the_brief_holds_the_plan_and_the_changes() {
    let mut changes = Changes::default();
    let cases: [(&str, Value); 5] = [
        ("Edit", json!({"file_path": "src/b.rs"})),
        ("Write", json!({"file_path": " src/a.rs "})),
        ("Edit", json!({"file_path": "src/b.rs"})),
        ("Read", json!({"file_path": "src/c.rs"})),
        ("Write", json!({"content": "no path"})),
    ];
    assert!(!changes.any());
    for (tool, input) in &cases {
        changes.record(tool, input);
    }
    assert!(changes.any() && !changes.bash);
    let text = brief(Some("1. Do it.\n"), &changes);
    insta::assert_snapshot!("verifier_brief", text);

    changes.record("Bash", &json!({"command": "sed -i s/a/b/ x"}));
    let text = brief(
        None,
        &Changes {
            files: Default::default(),
            ..changes
        },
    );
    assert!(text.contains("could not be found"), "{text}");
    assert!(text.contains("- (none)\n"), "{text}");
    assert!(
        text.contains("Bash commands, which may have changed"),
        "{text}"
    );
    assert!(text.ends_with(VERDICT_NUDGE), "{text}");
}

#[test]
fn the_harness_task_input_says_who_started_it() {
    let input = task_input("brief");
    assert_eq!(
        input,
        json!({
            "description": "Verify the execution against the approved plan",
            "prompt": "brief",
            "subagent_type": "verifier",
            "started_by": "ultraplan",
        })
    );
    let parsed = crate::subagents::task_tool::parse(&input).expect("valid Task input");
    assert_eq!(parsed.subagent_type.as_deref(), Some(NAME));
}
