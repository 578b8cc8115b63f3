//! Runs one read-only tool once over a tree and prints how many results it found, for
//! `bench/grep_glob.sh` to compare with ripgrep.
//!
//! Usage: `ultraplan-tool-bench ROOT (Glob|Grep) 'JSON input' [--print]`
//!
//! Prints one number: Glob → matching files; Grep → matching files (files_with_matches) or
//! matching lines (count, content). With `--print`, the tool's text output follows on stderr.

use std::io::Write as _;

use anyhow::{Context as _, bail};
use ultraplan_agent::Workspace;
use ultraplan_agent::tools::grep::OutputMode;
use ultraplan_agent::tools::{glob, grep};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, tool, input, rest @ ..] = args.as_slice() else {
        bail!("usage: ultraplan-tool-bench ROOT (Glob|Grep) 'JSON input' [--print]");
    };
    let print = rest.iter().any(|a| a == "--print");
    let workspace = Workspace::new(root)?;
    let input: serde_json::Value = serde_json::from_str(input).context("input is not JSON")?;
    let (count, text) = match tool.as_str() {
        "Glob" => {
            let input: glob::GlobInput = serde_json::from_value(input)?;
            let outcome = glob::search(&workspace, &input)?;
            (outcome.total as u64, outcome.render())
        }
        "Grep" => {
            let input: grep::GrepInput = serde_json::from_value(input)?;
            let outcome = grep::search(&workspace, &input)?;
            let count = match input.output_mode {
                OutputMode::FilesWithMatches => outcome.total_files,
                OutputMode::Count | OutputMode::Content => outcome.total_matches,
            };
            (count, outcome.render())
        }
        other => bail!("unknown tool {other}; use Glob or Grep"),
    };
    if print {
        writeln!(std::io::stderr(), "{text}")?;
    }
    writeln!(std::io::stdout(), "{count}")?;
    Ok(())
}
