//! The SQL both backends share, written once over the [`Backend`] primitives. Queries use
//! `$N` placeholders, which SQLite accepts too, and only types both drivers map the same way
//! (TEXT, BIGINT, BLOB, nullable). Writes run in the backend's write transaction
//! ([`Backend::write_tx`]); reads and single statements run on its pool.

mod bundles;
mod comments;
mod environments;
mod events;
mod flags;
mod leases;
mod plans;
mod rows;
mod runners;
mod secrets;
mod sessions;
mod users;
mod web;
mod work;

use std::collections::HashMap;

use async_trait::async_trait;
use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::patch::{Execution, PatchSummary};
use ultraplan_protocol::session::SessionStatus;

pub(super) use bundles::insert as insert_bundle;

use super::backend::Backend;
use super::retention::{self, Admission, Collected};
use super::{
    AddComment, AgentState, AppendEffects, BundleRow, Claim, CommentRow, DecideOutcome,
    EnvironmentRow, FlagRow, Lease, LinkRow, ModelCall, NewSession, PatchRow, PlanRow, SecretRow,
    SessionRow, Store, StoreError, StoreResult, TokenRow, UserRow, WebSessionRow,
};

/// A unique-key violation is "already exists"; anything else stays a database error.
fn map_unique(e: StoreError, what: &'static str) -> StoreError {
    match &e {
        StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            StoreError::AlreadyExists(what)
        }
        _ => e,
    }
}

#[async_trait]
impl<B: Backend> Store for B {
    async fn migrate(&self) -> StoreResult<()> {
        Backend::migrate(self).await
    }

    async fn announce(&self, session_id: &str) -> StoreResult<()> {
        Backend::announce(self, session_id).await
    }

    async fn create_user(&self, name: &str) -> StoreResult<UserRow> {
        users::create(&mut *self.pool(), name).await
    }

    async fn user_by_name(&self, name: &str) -> StoreResult<Option<UserRow>> {
        users::by_name(&mut *self.pool(), name).await
    }

    async fn user_by_id(&self, id: &str) -> StoreResult<Option<UserRow>> {
        users::by_id(&mut *self.pool(), id).await
    }

    async fn add_token(
        &self,
        user_id: &str,
        token_id: &str,
        salt: &str,
        hash: &str,
    ) -> StoreResult<()> {
        users::add_token(&mut *self.pool(), user_id, token_id, salt, hash).await
    }

    async fn token(&self, token_id: &str) -> StoreResult<Option<TokenRow>> {
        users::token(&mut *self.pool(), token_id).await
    }

    async fn add_runner_token(
        &self,
        name: &str,
        token_hash: &str,
        created_at: i64,
    ) -> StoreResult<()> {
        runners::add(&mut *self.pool(), name, token_hash, created_at).await
    }

    async fn runner_by_token_hash(&self, token_hash: &str) -> StoreResult<Option<String>> {
        runners::by_hash(&mut *self.pool(), token_hash).await
    }

    async fn runner_tokens(&self) -> StoreResult<Vec<(String, i64)>> {
        runners::list(&mut *self.pool()).await
    }

    async fn revoke_runner_token(&self, name: &str) -> StoreResult<bool> {
        runners::revoke(&mut *self.pool(), name).await
    }

    async fn put_secret(&self, row: &SecretRow) -> StoreResult<()> {
        secrets::put(&mut *self.pool(), row).await
    }

    async fn secret_names(&self, owner_id: &str) -> StoreResult<Vec<(String, i64)>> {
        secrets::names(&mut *self.pool(), owner_id).await
    }

    async fn delete_secret(&self, owner_id: &str, name: &str) -> StoreResult<bool> {
        secrets::delete(&mut *self.pool(), owner_id, name).await
    }

    async fn all_sealed_secrets(&self) -> StoreResult<Vec<SecretRow>> {
        secrets::all(&mut *self.pool()).await
    }

    async fn reseal_secret(
        &self,
        old: &SecretRow,
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> StoreResult<bool> {
        secrets::reseal(&mut *self.pool(), old, nonce, ciphertext).await
    }

    async fn sealed_secrets(
        &self,
        owner_id: &str,
        names: &[String],
    ) -> StoreResult<Vec<SecretRow>> {
        secrets::sealed(&mut *self.pool(), owner_id, names).await
    }

    async fn put_environment(&self, row: &EnvironmentRow) -> StoreResult<()> {
        environments::put(&mut *self.pool(), row).await
    }

    async fn environments_for(&self, owner_id: &str) -> StoreResult<Vec<EnvironmentRow>> {
        environments::visible_to(&mut *self.pool(), owner_id).await
    }

    async fn environment_for(
        &self,
        owner_id: &str,
        name: &str,
    ) -> StoreResult<Option<EnvironmentRow>> {
        environments::named(&mut *self.pool(), owner_id, name).await
    }

    async fn delete_environment(&self, owner_id: &str, name: &str) -> StoreResult<bool> {
        environments::delete(&mut *self.pool(), owner_id, name).await
    }

    async fn put_bundle(&self, user_id: &str, bundle: &BundleRow) -> StoreResult<()> {
        let mut tx = self.write_tx().await?;
        bundles::put(tx.conn(), user_id, bundle).await?;
        tx.commit().await
    }

    async fn owned_bundle(&self, user_id: &str, sha256: &str) -> StoreResult<Option<BundleRow>> {
        bundles::owned(&mut *self.pool(), user_id, sha256).await
    }

    async fn bundle_bytes_used(&self, user_id: &str) -> StoreResult<u64> {
        retention::bytes_used(&mut *self.pool(), user_id).await
    }

    async fn put_bundle_within_quota(
        &self,
        user_id: &str,
        bundle: &BundleRow,
        quota: u64,
    ) -> StoreResult<Admission> {
        retention::put_within_quota(self, user_id, bundle, quota).await
    }

    async fn bundle_known(&self, sha256: &str) -> StoreResult<bool> {
        retention::bundle_known(&mut *self.pool(), sha256).await
    }

    async fn collect_garbage(
        &self,
        now: i64,
        grace_ms: i64,
        busy: &(dyn for<'s> Fn(&'s str) -> bool + Sync),
    ) -> StoreResult<Collected> {
        retention::collect(self, now, grace_ms, busy).await
    }

    async fn create_session(
        &self,
        new: &NewSession,
        events: &[EventBody],
    ) -> StoreResult<(SessionRow, Vec<Event>)> {
        let mut tx = self.write_tx().await?;
        let created = sessions::create(tx.conn(), new, events).await?;
        tx.commit().await?;
        Ok(created)
    }

    async fn session_for_user(&self, user_id: &str, id: &str) -> StoreResult<Option<SessionRow>> {
        sessions::for_user(&mut *self.pool(), user_id, id).await
    }

    async fn session(&self, id: &str) -> StoreResult<Option<SessionRow>> {
        sessions::by_id(&mut *self.pool(), id).await
    }

    async fn list_sessions(&self, user_id: &str, limit: u32) -> StoreResult<Vec<SessionRow>> {
        sessions::list(&mut *self.pool(), user_id, limit).await
    }

    async fn sessions_with_status(
        &self,
        statuses: &[SessionStatus],
    ) -> StoreResult<Vec<SessionRow>> {
        sessions::with_status(&mut *self.pool(), statuses).await
    }

    async fn append_events(
        &self,
        session_id: &str,
        events: &[EventBody],
        effects: &AppendEffects,
    ) -> StoreResult<Vec<Event>> {
        let mut tx = self.write_tx().await?;
        let stored = events::append(tx.conn(), session_id, events, effects).await?;
        tx.commit().await?;
        Ok(stored)
    }

    async fn list_events(
        &self,
        session_id: &str,
        after_id: i64,
        limit: u32,
    ) -> StoreResult<(Vec<Event>, bool)> {
        events::list(&mut *self.pool(), session_id, after_id, limit).await
    }

    async fn last_results(&self, user_id: &str) -> StoreResult<HashMap<String, String>> {
        events::last_results(&mut *self.pool(), user_id).await
    }

    async fn set_status(&self, session_id: &str, status: SessionStatus) -> StoreResult<()> {
        let mut tx = self.write_tx().await?;
        sessions::set_status(tx.conn(), session_id, status).await?;
        tx.commit().await
    }

    async fn archive_session(&self, session_id: &str) -> StoreResult<bool> {
        sessions::archive(&mut *self.pool(), session_id).await
    }

    async fn set_agent_state(&self, session_id: &str, state: AgentState) -> StoreResult<()> {
        sessions::set_agent_state(&mut *self.pool(), session_id, state).await
    }

    async fn sessions_to_recover(&self) -> StoreResult<Vec<SessionRow>> {
        sessions::to_recover(&mut *self.pool()).await
    }

    async fn set_execution(&self, session_id: &str, execution: &Execution) -> StoreResult<()> {
        work::set_execution(&mut *self.pool(), session_id, execution).await
    }

    async fn set_context_before_execution(
        &self,
        session_id: &str,
        context: &ultraplan_protocol::session::SessionContext,
    ) -> StoreResult<bool> {
        work::set_context_before_execution(&mut *self.pool(), session_id, context).await
    }

    async fn mark_executing(&self, session_id: &str) -> StoreResult<bool> {
        work::mark_executing(&mut *self.pool(), session_id).await
    }

    async fn save_patch(
        &self,
        session_id: &str,
        diff: &[u8],
        summary: &PatchSummary,
    ) -> StoreResult<()> {
        let mut tx = self.write_tx().await?;
        work::save_patch(tx.conn(), session_id, diff, summary).await?;
        tx.commit().await
    }

    async fn patch(&self, session_id: &str) -> StoreResult<Option<PatchRow>> {
        work::patch(&mut *self.pool(), session_id).await
    }

    async fn sessions_executing(&self) -> StoreResult<Vec<SessionRow>> {
        sessions::executing(&mut *self.pool()).await
    }

    async fn record_model_call(&self, call: &ModelCall) -> StoreResult<Usage> {
        let mut tx = self.write_tx().await?;
        let total = work::record_model_call(tx.conn(), call).await?;
        tx.commit().await?;
        Ok(total)
    }

    async fn queue_session(&self, session_id: &str, now: i64) -> StoreResult<bool> {
        leases::queue(&mut *self.pool(), session_id, now).await
    }

    async fn claim_session(
        &self,
        runner: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Claim>> {
        let mut tx = self.write_tx().await?;
        let claim = leases::claim(tx.conn(), self.dialect(), runner, now, lease_ms).await?;
        tx.commit().await?;
        Ok(claim)
    }

    async fn renew_lease(&self, lease: &Lease, expires_at: i64) -> StoreResult<bool> {
        leases::renew(&mut *self.pool(), lease, expires_at).await
    }

    async fn release_lease(&self, lease: &Lease, requeue: bool) -> StoreResult<bool> {
        let requeue_at = requeue.then(super::now_ms);
        leases::release(&mut *self.pool(), lease, requeue_at).await
    }

    async fn release_leases_of(&self, runner: Option<&str>, now: i64) -> StoreResult<u64> {
        leases::release_all(&mut *self.pool(), runner, now).await
    }

    async fn set_status_as(&self, lease: &Lease, status: SessionStatus) -> StoreResult<bool> {
        leases::set_status_as(&mut *self.pool(), lease, status).await
    }

    async fn set_agent_state_as(&self, lease: &Lease, state: AgentState) -> StoreResult<bool> {
        leases::set_agent_state_as(&mut *self.pool(), lease, state).await
    }

    async fn park_session(&self, lease: &Lease, last_event_id: i64) -> StoreResult<bool> {
        leases::park(&mut *self.pool(), lease, last_event_id).await
    }

    async fn unpark_session(&self, session_id: &str, now: i64) -> StoreResult<bool> {
        leases::unpark(&mut *self.pool(), session_id, now).await
    }

    async fn sessions_waiting(&self, now: i64) -> StoreResult<i64> {
        leases::waiting(&mut *self.pool(), now).await
    }

    async fn user_events_after(&self, session_id: &str, after_id: i64) -> StoreResult<Vec<Event>> {
        leases::user_events_after(&mut *self.pool(), session_id, after_id).await
    }

    async fn plan(&self, session_id: &str, tool_use_id: &str) -> StoreResult<Option<PlanRow>> {
        plans::by_id(&mut *self.pool(), session_id, tool_use_id).await
    }

    async fn list_plans(&self, session_id: &str) -> StoreResult<Vec<PlanRow>> {
        plans::list(&mut *self.pool(), session_id).await
    }

    async fn decide_plan(
        &self,
        session_id: &str,
        tool_use_id: &str,
        decision: &Decision,
        result: &EventBody,
    ) -> StoreResult<DecideOutcome> {
        let mut tx = self.write_tx().await?;
        let outcome = plans::decide(tx.conn(), session_id, tool_use_id, decision, result).await?;
        tx.commit().await?;
        Ok(outcome)
    }

    async fn add_plan_comment(&self, new: &CommentRow, max: usize) -> StoreResult<AddComment> {
        let mut tx = self.write_tx().await?;
        let added = comments::add(tx.conn(), new, max).await?;
        if matches!(added, AddComment::Added(_)) {
            tx.commit().await?;
        }
        Ok(added)
    }

    async fn reopen_plan_comment(&self, new: &CommentRow, max: usize) -> StoreResult<AddComment> {
        let mut tx = self.write_tx().await?;
        let added = comments::reopen(tx.conn(), new, max).await?;
        if matches!(added, AddComment::Added(_)) {
            tx.commit().await?;
        }
        Ok(added)
    }

    async fn plan_comments(&self, session_id: &str) -> StoreResult<Vec<CommentRow>> {
        comments::of_session(&mut *self.pool(), session_id).await
    }

    async fn list_flags(&self) -> StoreResult<Vec<FlagRow>> {
        flags::list(&mut *self.pool()).await
    }

    async fn set_flag(&self, row: &FlagRow) -> StoreResult<()> {
        flags::set(&mut *self.pool(), row).await
    }

    async fn record_telemetry(
        &self,
        name: &str,
        labels: &serde_json::Value,
        user_id: Option<&str>,
        session_id: Option<&str>,
    ) -> StoreResult<()> {
        flags::record_telemetry(&mut *self.pool(), name, labels, user_id, session_id).await
    }

    async fn count_telemetry(&self, name: &str) -> StoreResult<i64> {
        flags::count_telemetry(&mut *self.pool(), name).await
    }

    async fn insert_login_link(&self, link: &LinkRow) -> StoreResult<()> {
        web::insert_link(&mut *self.pool(), link).await
    }

    async fn usable_login_link(&self, id: &str, now: i64) -> StoreResult<Option<LinkRow>> {
        web::usable_link(&mut *self.pool(), id, now).await
    }

    async fn use_login_link(&self, id: &str, now: i64) -> StoreResult<bool> {
        web::use_link(&mut *self.pool(), id, now).await
    }

    async fn insert_web_session(&self, row: &WebSessionRow) -> StoreResult<()> {
        web::insert_session(&mut *self.pool(), row).await
    }

    async fn web_session(&self, id: &str, now: i64) -> StoreResult<Option<WebSessionRow>> {
        web::session(&mut *self.pool(), id, now).await
    }

    async fn delete_web_session(&self, id: &str) -> StoreResult<()> {
        web::delete_session(&mut *self.pool(), id).await
    }
}
