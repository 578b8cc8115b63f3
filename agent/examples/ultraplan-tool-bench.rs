//! Runs one read-only tool once over a tree and prints what it found, for `bench/grep_glob.sh`
//! to compare with ripgrep.
//!
//! Usage: `ultraplan-tool-bench ROOT (Glob|Grep) 'JSON input' [--print | --list]`
//!
//! Prints one number: Glob → matching files; Grep → matching files (files_with_matches) or
//! matching lines (count, content). With `--print`, the tool's text output follows on stderr.
//! With `--list`, every result is printed instead, one per line and sorted, with nothing left
//! out: Glob and files_with_matches print paths, count prints `path:count`, content prints
//! `path:line` for each matching line.

use std::io::Write as _;

use anyhow::{Context as _, bail};
use ultraplan_agent::Workspace;
use ultraplan_agent::tools::grep::{GrepOutcome, Line, OutputMode};
use ultraplan_agent::tools::{glob, grep};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root, tool, input, rest @ ..] = args.as_slice() else {
        bail!("usage: ultraplan-tool-bench ROOT (Glob|Grep) 'JSON input' [--print | --list]");
    };
    let print = rest.iter().any(|a| a == "--print");
    let list = rest.iter().any(|a| a == "--list");
    let workspace = Workspace::new(root)?;
    let input: serde_json::Value = serde_json::from_str(input).context("input is not JSON")?;
    let (count, text) = match (tool.as_str(), list) {
        ("Glob", false) => {
            let input: glob::GlobInput = serde_json::from_value(input)?;
            let outcome = glob::search(&workspace, &input)?;
            (outcome.total as u64, outcome.render())
        }
        ("Glob", true) => {
            let input: glob::GlobInput = serde_json::from_value(input)?;
            return print_lines(glob::all_matches(&workspace, &input)?);
        }
        ("Grep", false) => {
            let input: grep::GrepInput = serde_json::from_value(input)?;
            let outcome = grep::search(&workspace, &input)?;
            let count = match input.output_mode {
                OutputMode::FilesWithMatches => outcome.total_files,
                OutputMode::Count | OutputMode::Content => outcome.total_matches,
            };
            (count, outcome.render())
        }
        ("Grep", true) => {
            let input: grep::GrepInput = serde_json::from_value(input)?;
            let outcome = grep::search_within(&workspace, &input, usize::MAX)?;
            return print_lines(grep_results(&outcome)?);
        }
        (other, _) => bail!("unknown tool {other}; use Glob or Grep"),
    };
    if print {
        writeln!(std::io::stderr(), "{text}")?;
    }
    writeln!(std::io::stdout(), "{count}")?;
    Ok(())
}

/// Every result of a search that kept everything.
fn grep_results(outcome: &GrepOutcome) -> anyhow::Result<Vec<String>> {
    if outcome.incomplete {
        bail!("the search dropped results although it was asked to keep them all");
    }
    let mut lines = Vec::new();
    for file in &outcome.files {
        match outcome.input.output_mode {
            OutputMode::FilesWithMatches => lines.push(file.path.clone()),
            OutputMode::Count => lines.push(format!("{}:{}", file.path, file.matches)),
            OutputMode::Content => lines.extend(file.lines.iter().filter_map(|line| match line {
                Line::Match(Some(n), _) => Some(format!("{}:{n}", file.path)),
                _ => None,
            })),
        }
    }
    Ok(lines)
}

fn print_lines(mut lines: Vec<String>) -> anyhow::Result<()> {
    lines.sort_unstable();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}
