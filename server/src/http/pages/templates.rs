//! The askama templates (in `web/templates`) and the structs they render.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::auth::WebUser;
#[allow(unused_imports)] // used by the generated template code
use super::changes::ChangesState;
use super::list::ListRow;
use super::session::Regions;
#[allow(unused_imports)] // used by the generated template code
use super::timeline::{Entry, EntryKind, ResultView};
use super::view::SessionView;

/// What every page's frame needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub title: String,
    pub css: String,
    pub js: String,
    pub icon: String,
    /// The logged-in user's name.
    pub user: Option<String>,
    /// The CSRF token for the logout form.
    pub csrf: String,
}

impl Layout {
    /// A page for someone not logged in.
    pub fn anonymous(title: &str) -> Self {
        Layout {
            title: title.to_owned(),
            css: super::assets::url("app.css"),
            js: super::assets::url("app.js"),
            icon: super::assets::url("icon.svg"),
            user: None,
            csrf: String::new(),
        }
    }

    /// A page for a logged-in user.
    pub fn for_user(title: &str, user: &WebUser) -> Self {
        Layout {
            user: Some(user.name.clone()),
            csrf: user.csrf.clone(),
            ..Layout::anonymous(title)
        }
    }
}

#[derive(Template)]
#[template(path = "error.html", config = "../web/askama.toml")]
pub struct ErrorPage {
    pub layout: Layout,
    pub status: u16,
    pub message: String,
    pub show_login: bool,
}

#[derive(Template)]
#[template(path = "login.html", config = "../web/askama.toml")]
pub struct LoginPage {
    pub layout: Layout,
    /// The login form's own CSRF token (double-submitted in a cookie).
    pub form_token: String,
    pub next: String,
    pub error: Option<String>,
}

#[derive(Template)]
#[template(path = "list.html", config = "../web/askama.toml")]
pub struct ListPage {
    pub layout: Layout,
    pub rows: Vec<ListRow>,
}

#[derive(Template)]
#[template(path = "list_rows.html", config = "../web/askama.toml")]
pub struct ListRows {
    pub rows: Vec<ListRow>,
}

#[derive(Template)]
#[template(path = "session.html", config = "../web/askama.toml")]
pub struct SessionPage {
    pub layout: Layout,
    pub v: SessionView,
    pub regions: Regions,
    pub timeline: Vec<Entry>,
}

#[derive(Template)]
#[template(path = "region_head.html", config = "../web/askama.toml")]
pub struct HeadRegion<'a> {
    pub v: &'a SessionView,
}

#[derive(Template)]
#[template(path = "region_changes.html", config = "../web/askama.toml")]
pub struct ChangesRegion<'a> {
    pub v: &'a SessionView,
}

#[derive(Template)]
#[template(path = "region_review.html", config = "../web/askama.toml")]
pub struct ReviewRegion<'a> {
    pub v: &'a SessionView,
}

#[derive(Template)]
#[template(path = "region_side.html", config = "../web/askama.toml")]
pub struct SideRegion<'a> {
    pub v: &'a SessionView,
}

#[derive(Template)]
#[template(path = "entry.html", config = "../web/askama.toml")]
pub struct EntryFragment<'a> {
    pub e: &'a Entry,
}

#[derive(Template)]
#[template(path = "result.html", config = "../web/askama.toml")]
pub struct ResultFragment<'a> {
    pub r: &'a ResultView,
}

/// An HTML response of a template, or a plain 500 when rendering fails.
pub fn render(status: StatusCode, template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => {
            let mut response = (status, html).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            response
        }
        Err(error) => {
            tracing::error!(%error, "template failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal server error").into_response()
        }
    }
}
