use serde_json::json;

use super::*;

fn found(text: &str) -> Vec<(String, u32, u32, &str)> {
    find(text)
        .into_iter()
        .map(|c| (c.path, c.first, c.last, &text[c.start..c.end]))
        .collect()
}

#[test]
fn finds_path_line_and_ranges() {
    type Row = (&'static str, &'static [(&'static str, u32, u32)]);
    let cases: &[Row] = &[
        ("see src/auth.rs:12 now", &[("src/auth.rs", 12, 12)]),
        ("src/auth.rs:12-20.", &[("src/auth.rs", 12, 20)]),
        (
            "(src/a.rs:3, lib/b.py:4-5)",
            &[("src/a.rs", 3, 3), ("lib/b.py", 4, 5)],
        ),
        ("./src/main.rs:7", &[("src/main.rs", 7, 7)]),
        ("src/auth.rs:12:5", &[("src/auth.rs", 12, 12)]),
        ("range backwards src/a.rs:9-3", &[("src/a.rs", 9, 9)]),
        ("at the end: Cargo.toml:1.", &[("Cargo.toml", 1, 1)]),
        ("no line src/auth.rs here", &[]),
        ("zero src/auth.rs:0", &[]),
        ("glued src/auth.rs:12abc", &[]),
        ("no dot or slash Makefile:3 localhost:8080", &[]),
        ("url http://example.com:80/x", &[]),
        ("parent ../etc/passwd:1", &[]),
        ("absolute /etc/passwd:1", &[]),
        ("double slash src//a.rs:1", &[]),
        ("huge src/a.rs:99999999999", &[]),
        ("word-glued xsrc/a.rs:1", &[("xsrc/a.rs", 1, 1)]),
    ];
    for (text, want) in cases {
        let got: Vec<_> = found(text)
            .into_iter()
            .map(|(p, a, b, _)| (p, a, b))
            .collect();
        let want: Vec<_> = want
            .iter()
            .map(|(p, a, b)| (p.to_string(), *a, *b))
            .collect();
        assert_eq!(got, want, "{text}");
    }
    assert_eq!(found("x src/a.rs:3-4, y")[0].3, "src/a.rs:3-4");
}

#[test]
fn clean_path_refuses_what_cannot_be_in_a_bundle() {
    let cases = [
        ("src/a.rs", Some("src/a.rs")),
        ("././a.rs", Some("a.rs")),
        ("", None),
        ("/abs.rs", None),
        ("a/../b.rs", None),
        ("a/./b.rs", None),
        ("dir/", None),
    ];
    for (raw, want) in cases {
        assert_eq!(clean_path(raw), want, "{raw:?}");
    }
}

fn reads() -> Reads {
    let mut r = Reads::default();
    r.read_call(&json!({"file_path": "/workspace/src/auth.rs", "offset": 1, "limit": 50}));
    r
}

fn exists(path: &str) -> bool {
    matches!(path, "src/auth.rs" | "src/db.rs")
}

#[test]
fn links_text_nodes_only_and_marks_reads() {
    let cases: [(&str, &str); 7] = [
        (
            "<p>see src/auth.rs:12</p>",
            "<p>see <a class=\"cite read\" href=\"/sessions/s1/code/src/auth.rs?line=12#L12\" \
             title=\"the agent read this\">src/auth.rs:12</a></p>",
        ),
        (
            "<p><code>src/db.rs:3-9</code></p>",
            "<p><code><a class=\"cite asserted\" \
             href=\"/sessions/s1/code/src/db.rs?line=3&amp;end=9#L3\" \
             title=\"the agent cited this without reading it here\">src/db.rs:3-9</a></code></p>",
        ),
        (
            "<p>src/auth.rs:99 is past the read</p>",
            "<p><a class=\"cite asserted\" href=\"/sessions/s1/code/src/auth.rs?line=99#L99\" \
             title=\"the agent cited this without reading it here\">src/auth.rs:99</a> is past \
             the read</p>",
        ),
        (
            "<p>missing src/gone.rs:1</p>",
            "<p>missing src/gone.rs:1</p>",
        ),
        (
            "<a href=\"https://x.test/src/auth.rs:12\">src/auth.rs:12</a>",
            "<a href=\"https://x.test/src/auth.rs:12\">src/auth.rs:12</a>",
        ),
        (
            "<h2 id=\"p-src-auth-rs-12\">Title</h2>",
            "<h2 id=\"p-src-auth-rs-12\">Title</h2>",
        ),
        (
            "<p>a &lt;src/auth.rs:2&gt; &amp; b</p>",
            "<p>a &lt;<a class=\"cite read\" href=\"/sessions/s1/code/src/auth.rs?line=2#L2\" \
             title=\"the agent read this\">src/auth.rs:2</a>&gt; &amp; b</p>",
        ),
    ];
    for (html, want) in cases {
        assert_eq!(link_html(html, "s1", &exists, &reads()), want, "{html}");
    }
}

#[test]
fn lists_cited_paths_outside_links() {
    let html = "<p>src/a.rs:1 and <code>src/b.rs:2-3</code> \
                <a href=\"https://x\">src/c.rs:4</a> src/a.rs:9</p>";
    let got: Vec<_> = paths_in_html(html).into_iter().collect();
    assert_eq!(got, ["src/a.rs", "src/b.rs"]);
}

#[test]
fn rendered_plan_with_citations_snapshot() {
    let plan = "# Fix the login check\n\n\
        1. The token is compared with `==` in `src/auth.rs:12` (see src/auth.rs:10-14).\n\
        2. `src/db.rs:40-52` opens a new pool per request.\n\
        3. [docs](https://example.com/src/auth.rs:12) and src/missing.rs:3 stay as they are.\n\n\
        ```sh\ncargo test # src/db.rs:7\n```\n";
    let rendered = super::super::markdown::render_plan(plan, "plan-r1-");
    let mut reads = Reads::default();
    reads.read_call(&json!({"file_path": "/workspace/src/auth.rs"}));
    reads.grep_result("/workspace/src/db.rs:7:let pool = Pool::new();");
    let html = link_html(&rendered.html, "0b5e", &exists, &reads);
    insta::assert_snapshot!(html);
}
