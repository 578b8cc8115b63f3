//! Markdown from plans and agents rendered with pulldown-cmark and then sanitised with
//! ammonia: no scripts, no event handlers, no `style`, only http(s)/mailto URLs. Plan headings
//! get stable, prefixed anchors and an outline.

use std::collections::{HashMap, HashSet};

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

/// A heading of a rendered plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    pub level: u8,
    pub text: String,
    /// The element id in the page (with the prefix).
    pub anchor: String,
}

/// Sanitised HTML and the headings it contains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub html: String,
    pub outline: Vec<Heading>,
}

fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES
}

/// A slug for a heading: lowercase words joined by `-`.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if (c.is_whitespace() || c == '-' || c == '_') && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-');
    if out.is_empty() {
        "section".to_owned()
    } else {
        out.chars().take(64).collect()
    }
}

/// Text of each heading, in order, and their unique slugs.
fn heading_slugs(events: &[Event<'_>]) -> Vec<(u8, String, String)> {
    let mut found = Vec::new();
    let mut current: Option<(u8, String)> = None;
    let mut used: HashMap<String, usize> = HashMap::new();
    for event in events {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                current = Some((*level as u8, String::new()))
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, text)) = current.as_mut() {
                    text.push_str(t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, text)) = current.take() {
                    let base = slug(&text);
                    let n = used.entry(base.clone()).or_insert(0);
                    *n += 1;
                    let unique = if *n == 1 { base } else { format!("{base}-{n}") };
                    found.push((level, text.trim().to_owned(), unique));
                }
            }
            _ => {}
        }
    }
    found
}

fn sanitizer<'a>(id_prefix: Option<&'a str>) -> ammonia::Builder<'a> {
    let mut builder = ammonia::Builder::default();
    builder
        .rm_tags(["area", "map"])
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .link_rel(Some("noopener noreferrer nofollow"));
    if let Some(prefix) = id_prefix {
        for tag in ["h1", "h2", "h3", "h4", "h5", "h6"] {
            builder.add_tag_attributes(tag, ["id"]);
        }
        builder.id_prefix(Some(prefix));
    }
    builder
}

/// Task list markers become plain glyphs instead of form controls.
fn tidy(event: Event<'_>) -> Event<'_> {
    match event {
        Event::TaskListMarker(done) => {
            Event::Text(CowStr::from(if done { "☑ " } else { "☐ " }))
        }
        other => other,
    }
}

/// Render a plan: headings get ids `<prefix><slug>` and come back as an outline.
pub fn render_plan(markdown: &str, prefix: &str) -> Rendered {
    let events: Vec<Event<'_>> = Parser::new_ext(markdown, options()).map(tidy).collect();
    let slugs = heading_slugs(&events);
    let mut next = slugs.iter();
    let events = events.into_iter().map(|event| match event {
        Event::Start(Tag::Heading {
            level,
            classes,
            attrs,
            ..
        }) => {
            let id = next.next().map(|(_, _, s)| CowStr::from(s.clone()));
            Event::Start(Tag::Heading {
                level,
                id,
                classes,
                attrs,
            })
        }
        other => other,
    });
    let mut raw = String::new();
    pulldown_cmark::html::push_html(&mut raw, events);
    let html = sanitizer(Some(prefix)).clean(&raw).to_string();
    let outline = slugs
        .into_iter()
        .map(|(level, text, slug)| Heading {
            level,
            text,
            anchor: format!("{prefix}{slug}"),
        })
        .collect();
    Rendered { html, outline }
}

/// Render agent text: Markdown, sanitised, no element ids.
pub fn render_text(markdown: &str) -> String {
    let mut raw = String::new();
    pulldown_cmark::html::push_html(&mut raw, Parser::new_ext(markdown, options()).map(tidy));
    sanitizer(None).clean(&raw).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_get_unique_prefixed_anchors() {
        let r = render_plan(
            "# Plan\n## Step one\ntext\n## Step one\n### `code` & more",
            "p-",
        );
        let anchors: Vec<_> = r
            .outline
            .iter()
            .map(|h| (h.level, h.anchor.as_str()))
            .collect();
        assert_eq!(
            anchors,
            [
                (1, "p-plan"),
                (2, "p-step-one"),
                (2, "p-step-one-2"),
                (3, "p-code-more")
            ]
        );
        assert!(
            r.html.contains(r#"<h2 id="p-step-one-2">Step one</h2>"#),
            "{}",
            r.html
        );
        assert_eq!(slug("  ?? "), "section");
    }

    #[test]
    fn hostile_markup_is_inert() {
        let hostile = "# Hi <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n\
            [click](javascript:alert(1)) <a href=\"JaVaScRiPt:alert(1)\">x</a>\n\n\
            <p style=\"color:red\" onclick=\"x()\">styled</p><iframe src=//evil></iframe>\n\n\
            <h2 id=\"review\">clobber</h2>\n\n- [x] done\n- [ ] open";
        for html in [render_plan(hostile, "p-").html, render_text(hostile)] {
            let lower = html.to_lowercase();
            for needle in [
                "<script",
                "onerror",
                "javascript:",
                "style=",
                "onclick",
                "<iframe",
                "<input",
                "id=\"review\"",
            ] {
                assert!(!lower.contains(needle), "{needle} in {html}");
            }
            assert!(html.contains("☑ done") && html.contains("☐ open"), "{html}");
        }
    }

    #[test]
    fn ordinary_markdown_survives() {
        let html = render_text(
            "Some **bold** `code` and [a link](https://example.com).\n\n| a | b |\n|---|---|\n| 1 | 2 |",
        );
        assert!(html.contains("<strong>bold</strong>"));
        assert!(html.contains("<code>code</code>"));
        assert!(html.contains("href=\"https://example.com\""));
        assert!(html.contains("rel=\"noopener noreferrer nofollow\""));
        assert!(html.contains("<table>"));
    }
}
