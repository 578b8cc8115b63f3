//! Ranking the files the searches found, and picking the lines worth citing.

use std::collections::{BTreeMap, BTreeSet};

use super::commands::file_name;
use super::evidence::Evidence;
use super::terms::{Term, TermKind};

/// A file and how well it matches the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ranked {
    pub(super) path: String,
    /// Indices (into the terms) of the terms the file contains, ascending.
    pub(super) terms: Vec<usize>,
    /// Matching lines over all terms.
    pub(super) matches: u64,
}

/// Files ranked by distinct terms matched, then matching lines, then path. Without any search
/// result, Glob's paths are ranked by the terms their path contains. Lockfiles, minified and
/// generated files never rank.
pub(super) fn rank(evidence: &Evidence, terms: &[Term]) -> Vec<Ranked> {
    let mut scores: BTreeMap<&str, (BTreeSet<usize>, u64)> = BTreeMap::new();
    for (i, term) in terms.iter().enumerate() {
        for (path, count) in evidence.counts.get(&term.pattern).into_iter().flatten() {
            let score = scores.entry(path).or_default();
            score.0.insert(i);
            score.1 += count;
        }
    }
    for path in &evidence.matched {
        scores.entry(path).or_default();
    }
    if scores.is_empty() && !evidence.searched {
        for path in &evidence.globbed {
            let lower = path.to_lowercase();
            let hits: BTreeSet<usize> = terms
                .iter()
                .enumerate()
                .filter(|(_, t)| lower.contains(&t.needle))
                .map(|(i, _)| i)
                .collect();
            if !hits.is_empty() {
                scores.insert(path, (hits, 0));
            }
        }
    }
    let mut ranked: Vec<Ranked> = scores
        .into_iter()
        .filter(|(path, _)| !is_noise(path))
        .map(|(path, (terms, matches))| Ranked {
            path: path.to_owned(),
            terms: terms.into_iter().collect(),
            matches,
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.terms
            .len()
            .cmp(&a.terms.len())
            .then_with(|| b.matches.cmp(&a.matches))
            .then_with(|| a.path.cmp(&b.path))
    });
    ranked
}

/// Files whose matches say nothing about the code: lockfiles, minified bundles, maps.
pub(super) fn is_noise(path: &str) -> bool {
    let name = file_name(path);
    let lock = name.ends_with(".lock")
        || matches!(
            name,
            "package-lock.json" | "npm-shrinkwrap.json" | "pnpm-lock.yaml" | "go.sum"
        );
    let generated = [".min.js", ".min.css", ".map", ".svg"]
        .iter()
        .any(|ext| name.ends_with(ext));
    let vendored = ["node_modules/", "vendor/", "dist/"]
        .iter()
        .any(|dir| path.starts_with(dir) || path.contains(&format!("/{dir}")));
    lock || generated || vendored
}

/// Whether the path looks like a test file.
pub(super) fn is_test_path(path: &str) -> bool {
    let lower = path.to_lowercase();
    lower.split('/').any(|part| {
        matches!(
            part,
            "test" | "tests" | "spec" | "specs" | "__tests__" | "e2e"
        ) || part.starts_with("test_")
            || part.contains("_test.")
            || part.contains(".test.")
            || part.contains(".spec.")
            || part.contains("_tests.")
    })
}

/// The files a path term names: Glob's or the ranking's paths that are it or end with it.
pub(super) fn named_files(term: &Term, evidence: &Evidence, ranked: &[Ranked]) -> Vec<String> {
    if term.kind != TermKind::Path {
        return Vec::new();
    }
    let want = term.text.trim_end_matches('/');
    let suffix = format!("/{want}");
    let mut found: Vec<String> = evidence
        .globbed
        .iter()
        .chain(ranked.iter().map(|r| &r.path))
        .filter(|p| *p == want || p.ends_with(&suffix))
        .cloned()
        .collect();
    found.sort();
    found.dedup();
    found
}

/// A cited line: `path:number` and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LineRef {
    pub(super) path: String,
    pub(super) number: u64,
    pub(super) text: String,
}

/// Up to `max` known lines of `path` that contain one of `terms`, preferring lines that
/// contain more of them, then earlier lines.
pub(super) fn cited_lines(
    evidence: &Evidence,
    path: &str,
    terms: &[&Term],
    max: usize,
) -> Vec<LineRef> {
    let Some(lines) = evidence.lines.get(path) else {
        return Vec::new();
    };
    let mut hits: Vec<(usize, u64, &String)> = lines
        .iter()
        .map(|(number, text)| {
            let n = terms.iter().filter(|t| t.occurs_in(text)).count();
            (n, *number, text)
        })
        .filter(|(n, _, text)| *n > 0 && !text.trim().is_empty())
        .collect();
    hits.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    hits.truncate(max);
    hits.sort_by_key(|h| h.1);
    hits.into_iter()
        .map(|(_, number, text)| LineRef {
            path: path.to_owned(),
            number,
            text: text.trim().to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::terms::{MAX_TERMS, salient_terms};
    use super::*;

    /// Evidence with per-file counts for the terms (by text) of `terms`.
    fn evidence_with_counts(terms: &[Term], counts: &[(&str, &[(&str, u64)])]) -> Evidence {
        let mut evidence = Evidence {
            searched: true,
            ..Evidence::default()
        };
        for (text, files) in counts {
            let pattern = terms
                .iter()
                .find(|t| t.text == *text)
                .map(|t| t.pattern.clone());
            evidence.counts.insert(
                pattern.unwrap_or_default(),
                files.iter().map(|(p, n)| ((*p).to_owned(), *n)).collect(),
            );
        }
        evidence
    }

    #[test]
    fn ranks_by_distinct_terms_then_matches_then_path() {
        let terms = salient_terms("login token refresh", MAX_TERMS);
        let evidence = evidence_with_counts(
            &terms,
            &[
                (
                    "login",
                    &[("b.rs", 9), ("a.rs", 1), ("c.rs", 1), ("Cargo.lock", 50)],
                ),
                ("token", &[("a.rs", 1), ("c.rs", 1), ("d.rs", 30)]),
                ("refresh", &[("c.rs", 1)]),
            ],
        );
        let got: Vec<(String, usize, u64)> = rank(&evidence, &terms)
            .into_iter()
            .map(|r| (r.path, r.terms.len(), r.matches))
            .collect();
        let want = [
            ("c.rs", 3, 3),
            ("a.rs", 2, 2),
            ("d.rs", 1, 30),
            ("b.rs", 1, 9),
        ]
        .map(|(p, t, m)| (p.to_owned(), t, m));
        assert_eq!(got, want);
    }

    #[test]
    fn falls_back_to_paths_without_search_results() {
        let terms = salient_terms("session timeout", MAX_TERMS);
        let evidence = Evidence {
            globbed: vec![
                "src/session/timeout.rs".into(),
                "src/session/mod.rs".into(),
                "src/main.rs".into(),
            ],
            ..Evidence::default()
        };
        let got: Vec<String> = rank(&evidence, &terms)
            .into_iter()
            .map(|r| r.path)
            .collect();
        assert_eq!(got, ["src/session/timeout.rs", "src/session/mod.rs"]);
    }

    #[test]
    fn classifies_paths() {
        let cases = [
            ("Cargo.lock", true, false),
            ("web/node_modules/x/index.js", true, false),
            ("app.min.js", true, false),
            ("src/auth.rs", false, false),
            ("tests/auth.rs", false, true),
            ("src/auth_test.go", false, true),
            ("web/login.spec.ts", false, true),
            ("test_login.py", false, true),
            ("src/latest.rs", false, false),
        ];
        for (path, noise, test) in cases {
            assert_eq!(
                (is_noise(path), is_test_path(path)),
                (noise, test),
                "{path}"
            );
        }
    }

    #[test]
    fn cites_lines_with_the_most_terms() {
        let terms = salient_terms("login token", MAX_TERMS);
        let refs: Vec<&Term> = terms.iter().collect();
        let mut evidence = Evidence::default();
        evidence.lines.insert(
            "a.rs".into(),
            [
                (1, "use token;"),
                (5, "fn login(token: Token)"),
                (9, "// login"),
                (12, "nothing"),
            ]
            .into_iter()
            .map(|(n, t)| (n, t.to_owned()))
            .collect(),
        );
        let got: Vec<u64> = cited_lines(&evidence, "a.rs", &refs, 2)
            .into_iter()
            .map(|l| l.number)
            .collect();
        assert_eq!(got, [1, 5]);
        assert!(cited_lines(&evidence, "b.rs", &refs, 2).is_empty());
    }

    #[test]
    fn path_terms_name_files() {
        let terms = salient_terms("see auth/session.rs", MAX_TERMS);
        let evidence = Evidence {
            globbed: vec!["src/auth/session.rs".into(), "src/session.rs".into()],
            ..Evidence::default()
        };
        assert_eq!(
            named_files(&terms[0], &evidence, &[]),
            ["src/auth/session.rs"]
        );
    }
}
