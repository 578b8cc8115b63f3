//! The exploring turns: which tools to call next, and with what input.
//!
//! 1. Discover: Glob the build manifests and the source files.
//! 2. Search: Grep the request's terms (one alternation listing files, one count per term).
//! 3. Inspect: Read the best-ranked files and the main manifests, and Grep each of those files
//!    for the terms' lines.
//!
//! After a rejection, one more Grep looks for the feedback's terms. Each phase runs at most once
//! per cycle; a phase whose tool is not offered (or that has nothing to do) is skipped.

use serde_json::{Value, json};

use super::commands::{MANIFEST_NAMES, is_manifest, main_manifests};
use super::evidence::Evidence;
use super::rank::{Ranked, is_test_path, named_files};
use super::request::{Call, Conversation};
use super::terms::{Term, TermKind, alternation};

/// Lines read from the top of each inspected file.
pub(super) const READ_LIMIT: u64 = 200;
/// Files inspected at most (named files first, then the best-ranked ones).
pub(super) const MAX_INSPECTED: usize = 4;
/// Manifests read at most.
const MAX_MANIFEST_READS: usize = 2;
/// Matching lines asked for per inspected file.
const LINES_PER_FILE: usize = 20;
/// Matching lines asked for when searching the feedback's terms.
const FEEDBACK_LINES: usize = 40;

/// The second Glob: source files of the common languages.
pub(super) const SOURCE_GLOB: &str = "**/*.{rs,py,go,ts,tsx,js,jsx,mjs,java,kt,scala,c,h,cc,cpp,\
hpp,cs,rb,php,swift,ex,exs,sh,sql,vue,svelte}";

/// The first Glob: build and test manifests anywhere.
pub(super) fn manifest_glob() -> String {
    format!("**/{{{}}}", MANIFEST_NAMES.join(","))
}

/// The exploring phases, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
    Discover,
    Search,
    Inspect,
}

/// A tool call to make.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ToolCall {
    pub(super) name: &'static str,
    pub(super) input: Value,
}

/// The next exploring turn: what to say and which tools to call.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Turn {
    pub(super) note: String,
    pub(super) calls: Vec<ToolCall>,
}

/// The phase an earlier call belonged to.
fn phase_of(call: &Call<'_>) -> Option<Phase> {
    match (call.name, call.input_str("output_mode")) {
        ("Glob", _) => Some(Phase::Discover),
        ("Grep", Some("content")) | ("Read", _) => Some(Phase::Inspect),
        ("Grep", _) => Some(Phase::Search),
        _ => None,
    }
}

/// What to inspect: files worth reading and citing, and the manifests to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Targets {
    pub(super) files: Vec<String>,
    pub(super) manifests: Vec<String>,
    /// The files known to exist (found by Glob or Grep), worth grepping for lines.
    pub(super) known: Vec<String>,
}

/// Files named by the request first (at most two), then the best-ranked files; plus the main
/// manifests.
pub(super) fn targets(terms: &[Term], evidence: &Evidence, ranked: &[Ranked]) -> Targets {
    let mut files: Vec<String> = Vec::new();
    for term in terms.iter().filter(|t| t.kind == TermKind::Path) {
        let named = named_files(term, evidence, ranked);
        let file = match named.into_iter().next() {
            Some(file) => file,
            None if !term.text.ends_with('/') => term.text.clone(),
            None => continue,
        };
        if files.len() < 2 && !files.contains(&file) {
            files.push(file);
        }
    }
    // The best-ranked files, keeping the last slot for the best test file when there is one.
    let mut pool: Vec<&String> = ranked
        .iter()
        .map(|r| &r.path)
        .filter(|p| !files.contains(p) && !is_manifest(p))
        .collect();
    let room = MAX_INSPECTED.saturating_sub(files.len());
    if let Some(test) = pool.iter().position(|p| is_test_path(p))
        && room > 0
        && test >= room
    {
        let test = pool.remove(test);
        pool.insert(room - 1, test);
    }
    files.extend(pool.into_iter().take(room).cloned());
    let manifests = main_manifests(&evidence.globbed, MAX_MANIFEST_READS)
        .into_iter()
        .filter(|m| !files.iter().any(|f| f == m))
        .map(str::to_owned)
        .collect();
    let known = files
        .iter()
        .filter(|f| evidence.globbed.contains(f) || ranked.iter().any(|r| r.path == **f))
        .cloned()
        .collect();
    Targets {
        files,
        manifests,
        known,
    }
}

/// The next exploring turn of the first cycle, if any is left.
pub(super) fn next_turn(
    convo: &Conversation<'_>,
    terms: &[Term],
    targets: &Targets,
) -> Option<Turn> {
    let done = convo.calls_in(0).filter_map(phase_of).max();
    let phases = [Phase::Discover, Phase::Search, Phase::Inspect];
    phases
        .into_iter()
        .filter(|phase| done.is_none_or(|d| *phase > d))
        .find_map(|phase| match phase {
            Phase::Discover => discover(convo),
            Phase::Search => search(convo, terms),
            Phase::Inspect => inspect(convo, terms, targets),
        })
}

fn discover(convo: &Conversation<'_>) -> Option<Turn> {
    convo.offers("Glob").then(|| Turn {
        note: "Looking for build manifests and source files.".to_owned(),
        calls: vec![glob(&manifest_glob()), glob(SOURCE_GLOB)],
    })
}

fn search(convo: &Conversation<'_>, terms: &[Term]) -> Option<Turn> {
    if !convo.offers("Grep") || terms.is_empty() {
        return None;
    }
    let mut calls = vec![grep(&alternation(terms), "files_with_matches", None, None)];
    calls.extend(terms.iter().map(|t| grep(&t.pattern, "count", None, None)));
    Some(Turn {
        note: format!("Searching the repository for {}.", quoted_list(terms)),
        calls,
    })
}

fn inspect(convo: &Conversation<'_>, terms: &[Term], targets: &Targets) -> Option<Turn> {
    let mut calls = Vec::new();
    if convo.offers("Read") {
        let reads = targets.files.iter().chain(&targets.manifests);
        calls.extend(reads.map(|path| read(path)));
    }
    if convo.offers("Grep") && !terms.is_empty() {
        let pattern = alternation(terms);
        calls.extend(
            targets
                .known
                .iter()
                .map(|path| grep(&pattern, "content", Some(path), Some(LINES_PER_FILE))),
        );
    }
    if calls.is_empty() {
        return None;
    }
    let mut shown: Vec<String> = targets.files.iter().map(|f| format!("`{f}`")).collect();
    shown.extend(targets.manifests.iter().map(|f| format!("`{f}`")));
    Some(Turn {
        note: format!("Reading the best matches: {}.", shown.join(", ")),
        calls,
    })
}

/// The turn that searches the terms of the latest feedback, unless done or impossible.
pub(super) fn feedback_turn(
    convo: &Conversation<'_>,
    cycle: usize,
    terms: &[Term],
) -> Option<Turn> {
    let searched = convo.calls_in(cycle).any(|c| c.name == "Grep");
    if searched || !convo.offers("Grep") || terms.is_empty() {
        return None;
    }
    Some(Turn {
        note: format!(
            "Searching for the feedback's terms: {}.",
            quoted_list(terms)
        ),
        calls: vec![grep(
            &alternation(terms),
            "content",
            None,
            Some(FEEDBACK_LINES),
        )],
    })
}

fn quoted_list(terms: &[Term]) -> String {
    terms
        .iter()
        .map(|t| format!("`{}`", t.text))
        .collect::<Vec<_>>()
        .join(", ")
}

fn glob(pattern: &str) -> ToolCall {
    ToolCall {
        name: "Glob",
        input: json!({ "pattern": pattern }),
    }
}

fn grep(pattern: &str, mode: &str, path: Option<&str>, limit: Option<usize>) -> ToolCall {
    let mut input = json!({ "pattern": pattern, "output_mode": mode, "-i": true });
    if let Some(path) = path {
        input["path"] = json!(path);
    }
    if mode == "content" {
        input["-n"] = json!(true);
    }
    if let Some(limit) = limit {
        input["head_limit"] = json!(limit);
    }
    ToolCall {
        name: "Grep",
        input,
    }
}

fn read(path: &str) -> ToolCall {
    ToolCall {
        name: "Read",
        input: json!({ "file_path": path, "limit": READ_LIMIT }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::terms::{MAX_TERMS, salient_terms};
    use super::*;

    #[test]
    fn the_best_test_file_keeps_a_slot() {
        let ranked: Vec<Ranked> = ["a.rs", "b.rs", "c.rs", "d.rs", "tests/a.rs", "tests/b.rs"]
            .iter()
            .map(|p| Ranked {
                path: (*p).to_owned(),
                terms: vec![0],
                matches: 1,
            })
            .collect();
        let got = targets(&[], &Evidence::default(), &ranked);
        assert_eq!(got.files, ["a.rs", "b.rs", "c.rs", "tests/a.rs"]);
        let got = targets(&[], &Evidence::default(), &ranked[..4]);
        assert_eq!(got.files, ["a.rs", "b.rs", "c.rs", "d.rs"]);
    }

    #[test]
    fn manifest_glob_lists_every_manifest() {
        let pattern = manifest_glob();
        assert!(
            pattern.starts_with("**/{Cargo.toml,package.json,"),
            "{pattern}"
        );
        assert!(pattern.ends_with("yarn.lock}"), "{pattern}");
    }

    #[test]
    fn targets_put_named_files_first_and_skip_manifests() {
        let terms = salient_terms("tune cache in lib/cache.py and docs/cache.md", MAX_TERMS);
        let evidence = Evidence {
            globbed: vec![
                "lib/cache.py".into(),
                "pyproject.toml".into(),
                "a/b/go.mod".into(),
            ],
            ..Evidence::default()
        };
        let ranked: Vec<Ranked> = [
            "pyproject.toml",
            "lib/store.py",
            "lib/cache.py",
            "x.py",
            "y.py",
        ]
        .iter()
        .map(|p| Ranked {
            path: (*p).to_owned(),
            terms: vec![0],
            matches: 1,
        })
        .collect();
        let got = targets(&terms, &evidence, &ranked);
        assert_eq!(
            got.files,
            ["lib/cache.py", "docs/cache.md", "lib/store.py", "x.py"]
        );
        assert_eq!(got.manifests, ["pyproject.toml", "a/b/go.mod"]);
        assert_eq!(got.known, ["lib/cache.py", "lib/store.py", "x.py"]);
    }
}
