//! Evidence links on the session page: the plan's citations of bundle files become links to
//! the code view, marked read or asserted from what the log says the agent read.

use std::collections::BTreeSet;

use super::bundle_files;
use super::citations::{link_html, paths_in_html};
use super::reads::Reads;
use super::view::SessionView;
use crate::http::state::AppState;
use crate::store::SessionRow;

/// Link the citations of every plan revision in `v`. Cheap when nothing is cited: the bundle
/// is only looked at for plans that cite a `path:line`.
pub async fn link(state: &AppState, row: &SessionRow, reads: &Reads, v: &mut SessionView) {
    let mut htmls: Vec<&mut String> = Vec::new();
    if let Some(plan) = v.plan.as_mut() {
        htmls.push(&mut plan.html);
    }
    htmls.extend(v.history.iter_mut().map(|r| &mut r.html));
    let cited: BTreeSet<String> = htmls.iter().flat_map(|h| paths_in_html(h)).collect();
    if cited.is_empty() {
        return;
    }
    let Some(root) = bundle_files::bundle_root(state, row).await else {
        return;
    };
    let found = tokio::task::spawn_blocking(move || bundle_files::existing(&root, &cited)).await;
    let existing = match found {
        Ok(existing) => existing,
        Err(error) => {
            tracing::warn!(session_id = %row.id, %error, "checking cited files failed");
            return;
        }
    };
    let exists = |path: &str| existing.contains(path);
    for html in htmls {
        *html = link_html(html, &row.id, &exists, reads);
    }
}
