//! Login links opened where they could be a login CSRF: from another site, or while another
//! user is logged in. Such a link never switches the browser's account by itself; it shows
//! who is logged in and whom the link is for, and logs in only when the user confirms with a
//! same-origin form post carrying the login form's double-submitted token. The link is not
//! spent until then.

use askama::Template;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::super::auth::{WebUser, random_hex};
use super::super::error::{PageError, PageResult};
use super::super::templates::{Layout, render};
use crate::http::state::AppState;
use crate::store::LinkRow;

#[derive(Template)]
#[template(path = "login_confirm.html", config = "../web/askama.toml")]
pub struct ConfirmPage {
    pub layout: Layout,
    /// The login form's CSRF token (double-submitted in a cookie).
    pub form_token: String,
    /// The link's `<id>.<secret>`, posted back to spend it.
    pub link: String,
    /// Who is logged in now, if anyone.
    pub current: Option<String>,
    /// Whom the link logs in.
    pub target: String,
    pub cross_site: bool,
}

/// The browser's `Sec-Fetch-Site`, if it sent one.
pub fn fetch_site(headers: &HeaderMap) -> Option<&str> {
    headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
}

/// Whether a navigation came from outside this origin (`same-origin` and `none`, a typed or
/// opened URL, are inside; an unknown value counts as outside). Browsers that send no
/// `Sec-Fetch-Site` at all are taken at their word.
pub fn from_elsewhere(fetch_site: Option<&str>) -> bool {
    fetch_site.is_some_and(|site| {
        !site.eq_ignore_ascii_case("same-origin") && !site.eq_ignore_ascii_case("none")
    })
}

/// Whether opening a link for `link_user` must be confirmed first.
pub fn must_confirm(fetch_site: Option<&str>, current: Option<&str>, link_user: &str) -> bool {
    from_elsewhere(fetch_site) || current.is_some_and(|user| user != link_user)
}

/// The confirmation page for `link` (`token` is its `<id>.<secret>`), and its form token.
pub async fn page(
    state: &AppState,
    current: Option<&WebUser>,
    link: &LinkRow,
    token: &str,
    cross_site: bool,
) -> PageResult<(Response, String)> {
    let target = user_name(state, &link.user_id).await?;
    let title = "Confirm login";
    let layout = match current {
        Some(user) => Layout::for_user(title, user),
        None => Layout::anonymous(title),
    };
    let form_token = random_hex(2);
    let page = ConfirmPage {
        layout,
        form_token: form_token.clone(),
        link: token.to_owned(),
        // Someone else's account is at stake only when the link is for another user.
        current: current
            .filter(|u| u.id != link.user_id)
            .map(|u| u.name.clone()),
        target,
        cross_site,
    };
    Ok((render(StatusCode::OK, &page), form_token))
}

/// A user's name by id.
async fn user_name(state: &AppState, user_id: &str) -> PageResult<String> {
    let user = state.core.store.user_by_id(user_id).await?;
    user.map(|u| u.name).ok_or(PageError::LinkInvalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_from_elsewhere_or_for_someone_else_are_confirmed() {
        // (Sec-Fetch-Site, logged in as, confirm)
        let cases = [
            (None, None, false),
            (Some("none"), None, false),
            (Some("same-origin"), None, false),
            (Some("same-origin"), Some("alice"), false),
            (Some("none"), Some("mallory"), true),
            (None, Some("mallory"), true),
            (Some("cross-site"), None, true),
            (Some("cross-site"), Some("alice"), true),
            (Some("same-site"), None, true),
            (Some("Cross-Site"), None, true),
            (Some("something-new"), None, true),
        ];
        for (site, current, want) in cases {
            assert_eq!(
                must_confirm(site, current, "alice"),
                want,
                "{site:?} {current:?}"
            );
        }
    }
}
