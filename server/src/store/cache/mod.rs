//! A [`Store`] in front of another that answers the poll path from memory
//! (docs/ARCHITECTURE.md §5): session rows and their plans by id, the "nothing after
//! `after_id`" answer for a session whose newest event the poller already has, the newest
//! events this process appended ([`tails`]), and verified tokens for a few seconds.
//! Every write that touches a session goes through here and forgets its row, or brings it up
//! to date when it knows what the write did (an append that directly follows it: [`appended`];
//! an unpark that changed nothing), so a read after a write always sees it; everything else
//! passes straight through.
//!
//! One process sees all its own writes. Other processes' writes (another replica on the same
//! PostgreSQL) reach it through [`Store::forget`]: each write is announced
//! ([`Store::announce`], `NOTIFY` on PostgreSQL) and every process follows the announcements
//! (`crate::replicas`), forgetting the session and waking its pollers.

mod appended;
mod memo;
mod tails;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::patch::{Execution, PatchSummary};
use ultraplan_protocol::session::SessionStatus;

use super::{
    AddComment, Admission, AgentState, AppendEffects, BundleRow, Claim, Collected, CommentRow,
    DecideOutcome, EnvironmentRow, FlagRow, Lease, LinkRow, ModelCall, NewSession, PatchRow,
    PlanRow, SecretRow, SessionRow, Store, StoreResult, TokenRow, UserRow, WebSessionRow,
};

/// The caching store.
pub struct CachedStore {
    inner: Arc<dyn Store>,
    sessions: memo::Sessions,
    tokens: memo::Tokens,
    tails: tails::Tails,
}

impl CachedStore {
    /// Cache in front of `inner`.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        CachedStore {
            inner,
            sessions: memo::Sessions::default(),
            tokens: memo::Tokens::default(),
            tails: tails::Tails::default(),
        }
    }

    /// Session rows held in memory.
    pub fn cached_sessions(&self) -> usize {
        self.sessions.count()
    }

    async fn row(&self, id: &str) -> StoreResult<Option<SessionRow>> {
        if let Some(row) = self.sessions.get(id) {
            return Ok(Some(row));
        }
        let ticket = self.sessions.ticket();
        let row = self.inner.session(id).await?;
        if let Some(row) = &row {
            self.sessions.fill(ticket, row);
        }
        Ok(row)
    }

    /// Run a write to session `id`, then forget its row whatever the outcome and tell other
    /// processes on the database. A failed announcement only means their pollers learn later
    /// (at their long poll's end), so it is logged, not returned.
    async fn writing<T>(
        &self,
        id: &str,
        write: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        self.writing_then(id, write, |_, _| false).await
    }

    /// [`CachedStore::writing`], where `change` may bring the remembered row up to date with
    /// what a successful write did instead of forgetting it (true when it could).
    async fn writing_then<T>(
        &self,
        id: &str,
        write: impl Future<Output = StoreResult<T>>,
        change: impl FnOnce(&T, &mut SessionRow) -> bool,
    ) -> StoreResult<T> {
        let result = write.await;
        match &result {
            Ok(done) => self.sessions.change(id, |row| change(done, row)),
            Err(_) => self.sessions.invalidate(id),
        }
        if let Err(error) = self.inner.announce(id).await {
            tracing::warn!(%error, session_id = id, "could not announce a session change");
        }
        result
    }
}

#[async_trait]
impl Store for CachedStore {
    async fn migrate(&self) -> StoreResult<()> {
        self.inner.migrate().await
    }
    async fn announce(&self, session_id: &str) -> StoreResult<()> {
        self.inner.announce(session_id).await
    }
    fn forget(&self, session_id: &str) {
        self.sessions.invalidate(session_id);
    }
    fn forget_all(&self) {
        self.sessions.clear();
    }

    async fn create_user(&self, name: &str) -> StoreResult<UserRow> {
        self.inner.create_user(name).await
    }
    async fn user_by_name(&self, name: &str) -> StoreResult<Option<UserRow>> {
        self.inner.user_by_name(name).await
    }
    async fn user_by_id(&self, id: &str) -> StoreResult<Option<UserRow>> {
        self.inner.user_by_id(id).await
    }
    async fn add_token(
        &self,
        user_id: &str,
        token_id: &str,
        salt: &str,
        hash: &str,
    ) -> StoreResult<()> {
        self.inner.add_token(user_id, token_id, salt, hash).await
    }
    async fn token(&self, token_id: &str) -> StoreResult<Option<TokenRow>> {
        let now = Instant::now();
        if let Some(row) = self.tokens.get(token_id, now) {
            return Ok(Some(row));
        }
        let row = self.inner.token(token_id).await?;
        if let Some(row) = &row {
            self.tokens.fill(row, now);
        }
        Ok(row)
    }
    // Runner tokens are never remembered: a revoked token stops working at once.
    async fn add_runner_token(
        &self,
        name: &str,
        token_hash: &str,
        created_at: i64,
    ) -> StoreResult<()> {
        self.inner
            .add_runner_token(name, token_hash, created_at)
            .await
    }
    async fn runner_by_token_hash(&self, token_hash: &str) -> StoreResult<Option<String>> {
        self.inner.runner_by_token_hash(token_hash).await
    }
    async fn runner_tokens(&self) -> StoreResult<Vec<(String, i64)>> {
        self.inner.runner_tokens().await
    }
    async fn revoke_runner_token(&self, name: &str) -> StoreResult<bool> {
        self.inner.revoke_runner_token(name).await
    }

    // Secrets are never remembered: a value set or deleted counts at once, on every replica.
    async fn put_environment(&self, row: &EnvironmentRow) -> StoreResult<()> {
        self.inner.put_environment(row).await
    }
    async fn environments_for(&self, owner_id: &str) -> StoreResult<Vec<EnvironmentRow>> {
        self.inner.environments_for(owner_id).await
    }
    async fn environment_for(
        &self,
        owner_id: &str,
        name: &str,
    ) -> StoreResult<Option<EnvironmentRow>> {
        self.inner.environment_for(owner_id, name).await
    }
    async fn delete_environment(&self, owner_id: &str, name: &str) -> StoreResult<bool> {
        self.inner.delete_environment(owner_id, name).await
    }
    async fn put_secret(&self, row: &SecretRow) -> StoreResult<()> {
        self.inner.put_secret(row).await
    }
    async fn secret_names(&self, owner_id: &str) -> StoreResult<Vec<(String, i64)>> {
        self.inner.secret_names(owner_id).await
    }
    async fn delete_secret(&self, owner_id: &str, name: &str) -> StoreResult<bool> {
        self.inner.delete_secret(owner_id, name).await
    }
    async fn all_sealed_secrets(&self) -> StoreResult<Vec<SecretRow>> {
        self.inner.all_sealed_secrets().await
    }
    async fn reseal_secret(
        &self,
        old: &SecretRow,
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> StoreResult<bool> {
        self.inner.reseal_secret(old, nonce, ciphertext).await
    }
    async fn sealed_secrets(
        &self,
        owner_id: &str,
        names: &[String],
    ) -> StoreResult<Vec<SecretRow>> {
        self.inner.sealed_secrets(owner_id, names).await
    }

    async fn put_bundle(&self, user_id: &str, bundle: &BundleRow) -> StoreResult<()> {
        self.inner.put_bundle(user_id, bundle).await
    }
    async fn owned_bundle(&self, user_id: &str, sha256: &str) -> StoreResult<Option<BundleRow>> {
        self.inner.owned_bundle(user_id, sha256).await
    }
    async fn bundle_bytes_used(&self, user_id: &str) -> StoreResult<u64> {
        self.inner.bundle_bytes_used(user_id).await
    }
    async fn put_bundle_within_quota(
        &self,
        user_id: &str,
        bundle: &BundleRow,
        quota: u64,
    ) -> StoreResult<Admission> {
        self.inner
            .put_bundle_within_quota(user_id, bundle, quota)
            .await
    }
    async fn bundle_known(&self, sha256: &str) -> StoreResult<bool> {
        self.inner.bundle_known(sha256).await
    }
    async fn collect_garbage(
        &self,
        now: i64,
        grace_ms: i64,
        busy: &(dyn for<'s> Fn(&'s str) -> bool + Sync),
    ) -> StoreResult<Collected> {
        self.inner.collect_garbage(now, grace_ms, busy).await
    }

    async fn create_session(
        &self,
        new: &NewSession,
        events: &[EventBody],
    ) -> StoreResult<(SessionRow, Vec<Event>)> {
        self.writing(&new.id, self.inner.create_session(new, events))
            .await
    }
    async fn session_for_user(&self, user_id: &str, id: &str) -> StoreResult<Option<SessionRow>> {
        Ok(self.row(id).await?.filter(|row| row.user_id == user_id))
    }
    async fn session(&self, id: &str) -> StoreResult<Option<SessionRow>> {
        self.row(id).await
    }
    async fn list_sessions(&self, user_id: &str, limit: u32) -> StoreResult<Vec<SessionRow>> {
        self.inner.list_sessions(user_id, limit).await
    }
    async fn sessions_with_status(
        &self,
        statuses: &[SessionStatus],
    ) -> StoreResult<Vec<SessionRow>> {
        self.inner.sessions_with_status(statuses).await
    }
    async fn append_events(
        &self,
        session_id: &str,
        events: &[EventBody],
        effects: &AppendEffects,
    ) -> StoreResult<Vec<Event>> {
        let append = async {
            let stored = self
                .inner
                .append_events(session_id, events, effects)
                .await?;
            self.tails.push(session_id, &stored);
            Ok(stored)
        };
        // The poll after an append reads neither the row nor the events.
        let update = |stored: &Vec<Event>, row: &mut SessionRow| {
            appended::apply(row, events, stored, effects)
        };
        self.writing_then(session_id, append, update).await
    }
    async fn list_events(
        &self,
        session_id: &str,
        after_id: i64,
        limit: u32,
    ) -> StoreResult<(Vec<Event>, bool)> {
        // A poller that already has the newest event is told so without a query, and one a
        // few events behind gets them from this process's tail of the log when it holds them.
        if let Some(row) = self.sessions.get(session_id) {
            if after_id >= row.last_event_id {
                return Ok((Vec::new(), false));
            }
            let tail = self
                .tails
                .after(session_id, after_id, row.last_event_id, limit);
            if let Some(events) = tail {
                return Ok((events, false));
            }
        }
        self.inner.list_events(session_id, after_id, limit).await
    }
    async fn last_results(&self, user_id: &str) -> StoreResult<HashMap<String, String>> {
        self.inner.last_results(user_id).await
    }
    async fn set_status(&self, session_id: &str, status: SessionStatus) -> StoreResult<()> {
        self.writing(session_id, self.inner.set_status(session_id, status))
            .await
    }
    async fn archive_session(&self, session_id: &str) -> StoreResult<bool> {
        self.writing(session_id, self.inner.archive_session(session_id))
            .await
    }
    async fn set_agent_state(&self, session_id: &str, state: AgentState) -> StoreResult<()> {
        self.writing(session_id, self.inner.set_agent_state(session_id, state))
            .await
    }
    async fn sessions_to_recover(&self) -> StoreResult<Vec<SessionRow>> {
        self.inner.sessions_to_recover().await
    }
    async fn queue_session(&self, session_id: &str, now: i64) -> StoreResult<bool> {
        self.writing(session_id, self.inner.queue_session(session_id, now))
            .await
    }
    async fn claim_session(
        &self,
        runner: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Claim>> {
        let claim = self.inner.claim_session(runner, now, lease_ms).await?;
        if let Some(claim) = &claim {
            self.writing(&claim.lease.session_id, async { Ok(()) })
                .await?;
        }
        Ok(claim)
    }
    /// A renewal changes nothing a reader sees, so nothing is forgotten or announced.
    async fn renew_lease(&self, lease: &Lease, expires_at: i64) -> StoreResult<bool> {
        self.inner.renew_lease(lease, expires_at).await
    }
    async fn release_lease(&self, lease: &Lease, requeue: bool) -> StoreResult<bool> {
        self.writing(&lease.session_id, self.inner.release_lease(lease, requeue))
            .await
    }
    async fn release_leases_of(&self, runner: Option<&str>, now: i64) -> StoreResult<u64> {
        let released = self.inner.release_leases_of(runner, now).await;
        self.forget_all();
        released
    }
    async fn set_status_as(&self, lease: &Lease, status: SessionStatus) -> StoreResult<bool> {
        let id = &lease.session_id;
        self.writing(id, self.inner.set_status_as(lease, status))
            .await
    }
    async fn set_agent_state_as(&self, lease: &Lease, state: AgentState) -> StoreResult<bool> {
        let id = &lease.session_id;
        self.writing(id, self.inner.set_agent_state_as(lease, state))
            .await
    }
    async fn park_session(&self, lease: &Lease, last_event_id: i64) -> StoreResult<bool> {
        let id = &lease.session_id;
        self.writing(id, self.inner.park_session(lease, last_event_id))
            .await
    }
    /// Every posted message asks to unpark; when the session was not parked the row is as it
    /// was, so it stays remembered.
    async fn unpark_session(&self, session_id: &str, now: i64) -> StoreResult<bool> {
        let unpark = self.inner.unpark_session(session_id, now);
        let unchanged = |unparked: &bool, _: &mut SessionRow| !*unparked;
        self.writing_then(session_id, unpark, unchanged).await
    }
    async fn sessions_waiting(&self, now: i64) -> StoreResult<i64> {
        self.inner.sessions_waiting(now).await
    }
    async fn user_events_after(&self, session_id: &str, after_id: i64) -> StoreResult<Vec<Event>> {
        self.inner.user_events_after(session_id, after_id).await
    }
    async fn set_execution(&self, session_id: &str, execution: &Execution) -> StoreResult<()> {
        self.writing(session_id, self.inner.set_execution(session_id, execution))
            .await
    }
    async fn set_context_before_execution(
        &self,
        session_id: &str,
        context: &ultraplan_protocol::session::SessionContext,
    ) -> StoreResult<bool> {
        let write = self.inner.set_context_before_execution(session_id, context);
        self.writing(session_id, write).await
    }
    async fn mark_executing(&self, session_id: &str) -> StoreResult<bool> {
        self.writing(session_id, self.inner.mark_executing(session_id))
            .await
    }
    async fn save_patch(
        &self,
        session_id: &str,
        diff: &[u8],
        summary: &PatchSummary,
    ) -> StoreResult<()> {
        self.writing(session_id, self.inner.save_patch(session_id, diff, summary))
            .await
    }
    async fn patch(&self, session_id: &str) -> StoreResult<Option<PatchRow>> {
        self.inner.patch(session_id).await
    }
    async fn sessions_executing(&self) -> StoreResult<Vec<SessionRow>> {
        self.inner.sessions_executing().await
    }
    async fn record_model_call(&self, call: &ModelCall) -> StoreResult<Usage> {
        self.writing(&call.session_id, self.inner.record_model_call(call))
            .await
    }

    async fn plan(&self, session_id: &str, tool_use_id: &str) -> StoreResult<Option<PlanRow>> {
        self.inner.plan(session_id, tool_use_id).await
    }
    async fn list_plans(&self, session_id: &str) -> StoreResult<Vec<PlanRow>> {
        if let Some(plans) = self.sessions.plans(session_id) {
            return Ok(plans);
        }
        let ticket = self.sessions.ticket();
        let plans = self.inner.list_plans(session_id).await?;
        self.sessions.fill_plans(ticket, session_id, &plans);
        Ok(plans)
    }
    async fn decide_plan(
        &self,
        session_id: &str,
        tool_use_id: &str,
        decision: &Decision,
        result: &EventBody,
    ) -> StoreResult<DecideOutcome> {
        let decide = self
            .inner
            .decide_plan(session_id, tool_use_id, decision, result);
        self.writing(session_id, decide).await
    }

    async fn add_plan_comment(&self, new: &CommentRow, max: usize) -> StoreResult<AddComment> {
        self.inner.add_plan_comment(new, max).await
    }
    async fn reopen_plan_comment(&self, new: &CommentRow, max: usize) -> StoreResult<AddComment> {
        self.inner.reopen_plan_comment(new, max).await
    }
    async fn plan_comments(&self, session_id: &str) -> StoreResult<Vec<CommentRow>> {
        self.inner.plan_comments(session_id).await
    }
    async fn list_flags(&self) -> StoreResult<Vec<FlagRow>> {
        self.inner.list_flags().await
    }
    async fn set_flag(&self, row: &FlagRow) -> StoreResult<()> {
        self.inner.set_flag(row).await
    }
    async fn record_telemetry(
        &self,
        name: &str,
        labels: &serde_json::Value,
        user_id: Option<&str>,
        session_id: Option<&str>,
    ) -> StoreResult<()> {
        self.inner
            .record_telemetry(name, labels, user_id, session_id)
            .await
    }
    async fn count_telemetry(&self, name: &str) -> StoreResult<i64> {
        self.inner.count_telemetry(name).await
    }

    async fn insert_login_link(&self, link: &LinkRow) -> StoreResult<()> {
        self.inner.insert_login_link(link).await
    }
    async fn usable_login_link(&self, id: &str, now: i64) -> StoreResult<Option<LinkRow>> {
        self.inner.usable_login_link(id, now).await
    }
    async fn use_login_link(&self, id: &str, now: i64) -> StoreResult<bool> {
        self.inner.use_login_link(id, now).await
    }
    async fn insert_web_session(&self, row: &WebSessionRow) -> StoreResult<()> {
        self.inner.insert_web_session(row).await
    }
    async fn web_session(&self, id: &str, now: i64) -> StoreResult<Option<WebSessionRow>> {
        self.inner.web_session(id, now).await
    }
    async fn delete_web_session(&self, id: &str) -> StoreResult<()> {
        self.inner.delete_web_session(id).await
    }
}
