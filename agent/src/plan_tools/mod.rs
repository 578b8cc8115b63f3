//! The plan-mode tools the harness itself answers: `TodoWrite` (kept in memory, and also
//! offered in execution mode),
//! `AskUserQuestion` and `ExitPlanMode` (answered by the user through the server).

pub mod ask;
pub mod exit_plan;
pub mod todo;

use ultraplan_protocol::model::ToolDefinition;

/// Their definitions, in the order they are offered after the read-only tools.
pub fn definitions() -> Vec<ToolDefinition> {
    vec![
        todo::definition(),
        ask::definition(),
        exit_plan::definition(),
    ]
}
