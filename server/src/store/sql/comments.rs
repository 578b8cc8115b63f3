//! Inline comments on plan passages (`migrations/*/0009_plan_comments.sql`): added while
//! their plan is pending and under a per-plan cap, listed, and carried over when reopened.

use super::super::backend::{Arg::Text, Conn, Row};
use super::super::comments::{AddComment, CommentRow};
use super::super::{StoreError, StoreResult};

/// Columns of a comment with its author's name, in the order [`row`] reads them.
macro_rules! cols {
    () => {
        "SELECT c.id, c.session_id, c.tool_use_id, c.quote, c.heading_path, c.body, \
         c.author_id, u.name AS author, c.created_at, c.state, c.reopened_from \
         FROM plan_comments c JOIN users u ON u.id = c.author_id "
    };
}

fn row(r: &Row) -> StoreResult<CommentRow> {
    let heading_path: Vec<String> = serde_json::from_str(&r.text("heading_path")?)?;
    Ok(CommentRow {
        id: r.text("id")?,
        session_id: r.text("session_id")?,
        tool_use_id: r.text("tool_use_id")?,
        quote: r.text("quote")?,
        heading_path,
        body: r.text("body")?,
        author_id: r.text("author_id")?,
        author: r.text("author")?,
        created_at: r.int("created_at")?,
        reopened: r.text("state")? == "reopened",
        reopened_from: r.opt_text("reopened_from")?,
    })
}

/// Every comment of the session, oldest first.
pub async fn of_session(c: &mut dyn Conn, session_id: &str) -> StoreResult<Vec<CommentRow>> {
    let sql = concat!(
        cols!(),
        "WHERE c.session_id = $1 ORDER BY c.created_at, c.id"
    );
    let rows = c.fetch_all(sql, &[Text(session_id)]).await?;
    rows.iter().map(row).collect()
}

async fn by_id(c: &mut dyn Conn, id: &str) -> StoreResult<Option<CommentRow>> {
    let sql = concat!(cols!(), "WHERE c.id = $1");
    let found = c.fetch_optional(sql, &[Text(id)]).await?;
    found.as_ref().map(row).transpose()
}

/// Insert `new` inside an open write transaction, if its plan is pending and carries fewer
/// than `max` comments.
pub async fn add(c: &mut dyn Conn, new: &CommentRow, max: usize) -> StoreResult<AddComment> {
    // A no-op write to the pending plan's row: on PostgreSQL it holds the row's lock until
    // commit, so adds to one plan count one after another and none lands after a decision
    // (which updates the same row); SQLite's write transaction serializes them anyway.
    let pending = c
        .execute(
            "UPDATE plans SET status = status \
             WHERE session_id = $1 AND tool_use_id = $2 AND status = 'pending'",
            &[Text(&new.session_id), Text(&new.tool_use_id)],
        )
        .await?;
    if pending == 0 {
        let plan = c
            .fetch_optional(
                "SELECT 1 AS one FROM plans WHERE session_id = $1 AND tool_use_id = $2",
                &[Text(&new.session_id), Text(&new.tool_use_id)],
            )
            .await?;
        return Ok(match plan {
            Some(_) => AddComment::NotPending,
            None => AddComment::UnknownPlan,
        });
    }
    let count = c
        .fetch_one(
            "SELECT COUNT(*) AS n FROM plan_comments WHERE session_id = $1 AND tool_use_id = $2",
            &[Text(&new.session_id), Text(&new.tool_use_id)],
        )
        .await?
        .int("n")?;
    if usize::try_from(count).unwrap_or(usize::MAX) >= max {
        return Ok(AddComment::Full);
    }
    let heading_path = serde_json::to_string(&new.heading_path)?;
    c.execute(
        "INSERT INTO plan_comments (id, session_id, tool_use_id, quote, heading_path, body, \
         author_id, created_at, state, reopened_from) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'open', $9)",
        &[
            Text(&new.id),
            Text(&new.session_id),
            Text(&new.tool_use_id),
            Text(&new.quote),
            Text(&heading_path),
            Text(&new.body),
            Text(&new.author_id),
            new.created_at.into(),
            new.reopened_from.as_deref().into(),
        ],
    )
    .await?;
    let added = by_id(c, &new.id)
        .await?
        .ok_or(StoreError::NotFound("comment"))?;
    Ok(AddComment::Added(Box::new(added)))
}

/// Inside an open write transaction: mark the comment `new.reopened_from` names reopened
/// (only once) and add `new`, its copy on a later revision.
pub async fn reopen(c: &mut dyn Conn, new: &CommentRow, max: usize) -> StoreResult<AddComment> {
    let Some(old) = new.reopened_from.as_deref() else {
        return Ok(AddComment::AlreadyReopened);
    };
    let marked = c
        .execute(
            "UPDATE plan_comments SET state = 'reopened' \
             WHERE id = $1 AND session_id = $2 AND state = 'open'",
            &[Text(old), Text(&new.session_id)],
        )
        .await?;
    if marked == 0 {
        return Ok(AddComment::AlreadyReopened);
    }
    add(c, new, max).await
}
