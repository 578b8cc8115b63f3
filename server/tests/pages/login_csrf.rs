//! Login CSRF: a login link opened from another site, or while someone else is logged in,
//! never switches the browser's account by itself. It asks, and only a same-origin post of
//! the confirmation form (with its double-submitted token) logs in and spends the link.

use serde_json::json;

use crate::browser::Browser;
use crate::support::{Server, User, encode};

/// Mint a login link for `user`.
async fn link_for(server: &Server, user: &User) -> String {
    let (status, body) = server.login_link(user, "/").await;
    assert_eq!(status, 201, "{body}");
    body["url"].as_str().expect("url").to_owned()
}

/// Open a link with the browser's cookie and `Sec-Fetch-Site`: status, body and the
/// `Set-Cookie` headers.
async fn open(
    server: &Server,
    url: &str,
    cookie: Option<&str>,
    site: Option<&str>,
) -> (u16, String, Vec<String>) {
    let mut request = server.http.get(url);
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    if let Some(site) = site {
        request = request.header("sec-fetch-site", site);
    }
    let r = request.send().await.expect("send");
    let cookies = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect();
    (
        r.status().as_u16(),
        r.text().await.unwrap_or_default(),
        cookies,
    )
}

/// Who the sessions list says is logged in.
async fn account(server: &Server, cookie: &str) -> String {
    let (status, html) = server.page(cookie, "/").await;
    assert_eq!(status, 200);
    let marker = "class=\"account-name\"";
    let start = html.find(marker).expect("an account name") + marker.len();
    let rest = &html[start..];
    let open = rest.find('>').expect("tag end") + 1;
    rest[open..].split('<').next().expect("name").to_owned()
}

/// The confirmation form's token (the page's first form may be the logout form).
fn confirm_token(html: &str) -> String {
    let form = html
        .find("action=\"/login\"")
        .expect("the confirmation form");
    let marker = "name=\"csrf\" value=\"";
    let start = html[form..].find(marker).expect("csrf field") + form + marker.len();
    html[start..].split('"').next().expect("value").to_owned()
}

/// `name=value` of the `Set-Cookie` for `name`.
fn cookie_pair(set_cookies: &[String], name: &str) -> Option<String> {
    set_cookies
        .iter()
        .filter_map(|c| c.split(';').next())
        .find(|pair| pair.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// Post the confirmation form.
async fn confirm(
    server: &Server,
    cookies: &str,
    token: &str,
    link: &str,
    site: &str,
) -> (u16, Vec<String>) {
    let r = server
        .http
        .post(server.url("/login"))
        .header("cookie", cookies)
        .header("sec-fetch-site", site)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(&[("csrf", token), ("link", link)]))
        .send()
        .await
        .expect("send");
    let set = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect();
    (r.status().as_u16(), set)
}

#[tokio::test]
async fn a_cross_site_login_link_never_switches_the_logged_in_user() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let mallory = server.user("mallory").await;
    let alice_cookie = server.cookie(&alice).await;
    assert_eq!(account(&server, &alice_cookie).await, "alice");

    let url = link_for(&server, &mallory).await;
    // From another site, from this site, or typed: alice is asked, never switched.
    for site in [Some("cross-site"), Some("same-site"), Some("none"), None] {
        let (status, html, set) = open(&server, &url, Some(&alice_cookie), site).await;
        assert_eq!(status, 200, "{site:?}: a confirmation page, not a redirect");
        assert!(html.contains("id=\"current-user\">alice<"), "{html}");
        assert!(html.contains("id=\"link-user\">mallory<"), "{html}");
        assert_eq!(
            html.contains("opened from another site"),
            matches!(site, Some("cross-site" | "same-site")),
            "{site:?}"
        );
        assert!(
            cookie_pair(&set, "ultraplan_session").is_none(),
            "{site:?}: no new session: {set:?}"
        );
        assert_eq!(account(&server, &alice_cookie).await, "alice");
    }
    // Nobody logged in, but the link comes from another site: still asked.
    let (status, html, set) = open(&server, &url, None, Some("cross-site")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Log in as mallory?"), "{html}");
    assert!(cookie_pair(&set, "ultraplan_session").is_none());

    // A forged confirmation: from another site, or without the form's cookie.
    let (_, html, set) = open(&server, &url, Some(&alice_cookie), Some("cross-site")).await;
    let token = confirm_token(&html);
    let form_cookie = cookie_pair(&set, "ultraplan_login").expect("form cookie");
    let link = url
        .split("/login/")
        .nth(1)
        .and_then(|t| t.split('?').next())
        .expect("link token")
        .to_owned();
    let both = format!("{alice_cookie}; {form_cookie}");
    let (status, _) = confirm(&server, &both, &token, &link, "cross-site").await;
    assert_eq!(status, 403, "a cross-site confirmation");
    let (status, _) = confirm(&server, &alice_cookie, &token, &link, "same-origin").await;
    assert_eq!(status, 403, "a confirmation without the form cookie");
    assert_eq!(account(&server, &alice_cookie).await, "alice");

    // Confirming on the page itself switches, once.
    let (status, set) = confirm(&server, &both, &token, &link, "same-origin").await;
    assert_eq!(status, 303);
    let mallory_cookie = cookie_pair(&set, "ultraplan_session").expect("a new session");
    assert_eq!(account(&server, &mallory_cookie).await, "mallory");
    let (status, _, _) = open(&server, &url, Some(&mallory_cookie), Some("none")).await;
    assert_eq!(status, 410, "the link was spent by the confirmation");
    let (status, _) = confirm(&server, &both, &token, &link, "same-origin").await;
    assert_eq!(status, 410, "and cannot be confirmed twice");
}

#[tokio::test]
async fn a_users_own_link_from_another_site_asks_too() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let alice_cookie = server.cookie(&alice).await;
    let url = link_for(&server, &alice).await;
    let (status, html, set) = open(&server, &url, Some(&alice_cookie), Some("cross-site")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Log in as alice?"), "{html}");
    assert!(!html.contains("id=\"current-user\""), "{html}");
    assert!(cookie_pair(&set, "ultraplan_session").is_none());
}

#[tokio::test]
async fn the_same_user_or_a_fresh_browser_logs_in_at_once() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let alice_cookie = server.cookie(&alice).await;
    for cookie in [Some(alice_cookie.as_str()), None] {
        for site in [Some("none"), Some("same-origin"), None] {
            let url = link_for(&server, &alice).await;
            let (status, _, set) = open(&server, &url, cookie, site).await;
            assert_eq!(status, 303, "{cookie:?} {site:?}");
            let fresh = cookie_pair(&set, "ultraplan_session").expect("session");
            assert_eq!(account(&server, &fresh).await, "alice");
        }
    }
}

#[tokio::test]
async fn in_chromium_a_link_opened_from_another_site_asks_before_switching() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let mallory = server.user("mallory").await;
    let browser = Browser::start(1280, 900).await;
    // Alice logs in the usual way (the browser opens her link: Sec-Fetch-Site none).
    browser.goto(&link_for(&server, &alice).await).await;
    browser.until_text(".account-name", "alice").await;

    // A page on another site (localhost is not the site 127.0.0.1) sends the browser to
    // mallory's link.
    let evil = server.base.replace("127.0.0.1", "localhost");
    browser.goto(&format!("{evil}/login")).await;
    let url = link_for(&server, &mallory).await;
    browser
        .js(&format!("location.href = {}; return true", json!(url)))
        .await;
    browser.until_text("#link-user", "mallory").await;
    browser.until_text("#current-user", "alice").await;
    browser
        .until_text(".notice", "opened from another site")
        .await;

    // Still alice everywhere.
    browser.goto(&server.url("/")).await;
    browser.until_text(".account-name", "alice").await;

    // Back on the (unspent) link, alice confirms: now she is mallory.
    browser.goto(&url).await;
    browser.click("#confirm-login").await;
    browser.until_text(".account-name", "mallory").await;
    let here = "return location.pathname === '/'";
    browser.until("the sessions list", here).await;
    browser.close().await;
}
