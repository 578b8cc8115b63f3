//! `GET /sessions/{id}/code/{*path}`: a read-only, highlighted view of one file of the
//! session's bundle, for the owner only. `?line=N` (and `&end=M`) marks the cited lines;
//! every line has an `#L<n>` anchor.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::auth::WebUser;
use super::bundle_files::{self, FileContent, MAX_SHOWN_BYTES, Refused};
use super::error::{PageError, PageResult};
use super::format::thousands;
use super::highlight;
use super::session::owned;
use super::templates::{Layout, render};
use crate::http::state::AppState;

/// The cited lines.
#[derive(Debug, Default, Deserialize)]
pub struct CodeQuery {
    pub line: Option<String>,
    pub end: Option<String>,
}

/// One line of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeLine {
    pub n: usize,
    /// Escaped, highlighted HTML.
    pub html: String,
    pub marked: bool,
}

#[derive(Template)]
#[template(path = "code.html", config = "../web/askama.toml")]
pub struct CodePage {
    pub layout: Layout,
    pub session_id: String,
    pub session_title: String,
    pub path: String,
    pub lines: Vec<CodeLine>,
    /// What is not shown (binary, cut short), in words.
    pub note: Option<String>,
}

/// The marked range from the query: `line`, up to `end` when it is not before it.
pub fn marked_range(query: &CodeQuery) -> Option<(usize, usize)> {
    let first: usize = query.line.as_deref()?.trim().parse().ok()?;
    let last = query
        .end
        .as_deref()
        .and_then(|e| e.trim().parse::<usize>().ok())
        .filter(|&e| e >= first)
        .unwrap_or(first);
    (first >= 1).then_some((first, last))
}

/// The page's lines and note for a file's content.
pub fn view_of(
    path: &str,
    content: &FileContent,
    marked: Option<(usize, usize)>,
) -> (Vec<CodeLine>, Option<String>) {
    match content {
        FileContent::Binary { size } => (
            Vec::new(),
            Some(format!("binary file, {} bytes", thousands(*size))),
        ),
        FileContent::Text {
            text,
            truncated,
            size,
        } => {
            let lines = highlight::lines(path, text)
                .into_iter()
                .enumerate()
                .map(|(i, html)| CodeLine {
                    n: i + 1,
                    html,
                    marked: marked.is_some_and(|(a, b)| (a..=b).contains(&(i + 1))),
                })
                .collect();
            let note = if *truncated {
                Some(format!(
                    "This file is {} bytes; only its first {} bytes are shown.",
                    thousands(*size),
                    thousands(MAX_SHOWN_BYTES)
                ))
            } else if text.is_empty() {
                Some("empty file".to_owned())
            } else {
                None
            };
            (lines, note)
        }
    }
}

/// `GET /sessions/{id}/code/{*path}`.
pub async fn page(
    State(state): State<AppState>,
    user: WebUser,
    Path((id, path)): Path<(String, String)>,
    Query(query): Query<CodeQuery>,
) -> PageResult<Response> {
    let row = owned(&state, &user, &id).await?;
    let root = bundle_files::bundle_root(&state, &row)
        .await
        .ok_or(PageError::Missing("this session has no readable bundle"))?;
    let rel = path.clone();
    let content = tokio::task::spawn_blocking(move || {
        let real = bundle_files::resolve(&root, &rel)?;
        bundle_files::read(&real).map_err(|error| {
            tracing::warn!(%error, path = %rel, "bundle file unreadable");
            Refused::Missing
        })
    })
    .await
    .map_err(|_| PageError::Missing("no such file in the bundle"))?
    .map_err(|refused| match refused {
        Refused::Outside => PageError::BadRequest(refused.to_string()),
        Refused::Missing => PageError::Missing("no such file in the bundle"),
    })?;
    let (lines, note) = view_of(&path, &content, marked_range(&query));
    let page = CodePage {
        layout: Layout::for_user(&path, &user),
        session_id: row.id.clone(),
        session_title: row.title.clone(),
        path,
        lines,
        note,
    };
    Ok(render(StatusCode::OK, &page))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_range_from_the_query() {
        let q = |line: Option<&str>, end: Option<&str>| CodeQuery {
            line: line.map(str::to_owned),
            end: end.map(str::to_owned),
        };
        let cases = [
            (q(Some("12"), None), Some((12, 12))),
            (q(Some("3"), Some("9")), Some((3, 9))),
            (q(Some("9"), Some("3")), Some((9, 9))),
            (q(Some("0"), None), None),
            (q(Some("x"), None), None),
            (q(None, Some("4")), None),
        ];
        for (query, want) in cases {
            assert_eq!(marked_range(&query), want, "{query:?}");
        }
    }

    #[test]
    fn binary_and_cut_files_say_so() {
        let (lines, note) = view_of("a.png", &FileContent::Binary { size: 2048 }, None);
        assert!(lines.is_empty());
        assert_eq!(note.as_deref(), Some("binary file, 2,048 bytes"));
        let text = FileContent::Text {
            text: "a\nb\nc\n".into(),
            truncated: true,
            size: 5_000_000,
        };
        let (lines, note) = view_of("a.txt", &text, Some((2, 3)));
        let marked: Vec<_> = lines.iter().map(|l| (l.n, l.marked)).collect();
        assert_eq!(marked, [(1, false), (2, true), (3, true)]);
        assert!(note.is_some_and(|n| n.contains("5,000,000") && n.contains("first")));
        let empty = FileContent::Text {
            text: String::new(),
            truncated: false,
            size: 0,
        };
        assert_eq!(
            view_of("e.rs", &empty, None).1.as_deref(),
            Some("empty file")
        );
    }
}
