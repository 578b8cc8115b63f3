//! The SQL both backends share. Queries use `$N` placeholders, which SQLite accepts too, and
//! only types both drivers map the same way (TEXT, BIGINT, nullable), so one body of code
//! implements [`Store`](super::Store) for each pool type through [`impl_store!`].

/// Columns of `sessions`, in the order [`session_from_row`] reads them.
macro_rules! session_cols {
    () => {
        "id, user_id, title, bundle_id, status, context, usage, last_event_id, plan_revisions, \
         created_at, updated_at, last_activity_at, archived_at, agent_state, activity, execution, \
         (SELECT COUNT(*) FROM plans p WHERE p.session_id = sessions.id \
          AND p.status = 'pending') AS pending_plans"
    };
}

/// Columns of `plans`, in the order `plan_from_row` reads them.
macro_rules! plan_cols {
    () => {
        "session_id, tool_use_id, revision, plan, status, decision, event_id, decision_event_id, \
         created_at, decided_at"
    };
}

/// Implement the store for `$store`, whose field `pool` is a `sqlx::Pool<$db>` and whose
/// inherent `write_tx()` opens a write transaction.
macro_rules! impl_store {
    ($store:ty, $db:ty, $variant:ident) => {
        use sqlx::Row as _;
        use ultraplan_protocol::api::{Decision, PlanStatus};
        use ultraplan_protocol::constants::ASK_USER_QUESTION_TOOL;
        use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
        use ultraplan_protocol::plan_text::decision_tool_result;
        use ultraplan_protocol::session::SessionStatus;
        use $crate::store::models::{same_decision, status_for};
        use ultraplan_protocol::model::Usage;
        use $crate::store::{
            AgentState, BundleRow, DecideOutcome, FlagRow, ModelCall, NewSession, PlanRow,
            PatchRow, SessionRow, StoreError, StoreResult, TokenRow, UserRow, format_ms, now_ms,
        };
        use ultraplan_protocol::patch::{Execution, ExecutionState, PatchSummary};

        type Tx = sqlx::Transaction<'static, $db>;
        type DbRow = <$db as sqlx::Database>::Row;

        fn map_unique(e: sqlx::Error, what: &'static str) -> StoreError {
            match &e {
                sqlx::Error::Database(db) if db.is_unique_violation() => {
                    StoreError::AlreadyExists(what)
                }
                _ => StoreError::Database(e),
            }
        }

        fn session_from_row(row: &DbRow) -> StoreResult<SessionRow> {
            let status: String = row.try_get("status")?;
            let revisions: i64 = row.try_get("plan_revisions")?;
            Ok(SessionRow {
                id: row.try_get("id")?,
                user_id: row.try_get("user_id")?,
                title: row.try_get("title")?,
                bundle_id: row.try_get("bundle_id")?,
                status: SessionStatus::parse(&status)
                    .ok_or_else(|| StoreError::Corrupt(format!("session status {status}")))?,
                context: serde_json::from_str(&row.try_get::<String, _>("context")?)?,
                usage: serde_json::from_str(&row.try_get::<String, _>("usage")?)?,
                last_event_id: row.try_get("last_event_id")?,
                plan_revisions: u32::try_from(revisions).unwrap_or(u32::MAX),
                created_at: row.try_get("created_at")?,
                updated_at: row.try_get("updated_at")?,
                last_activity_at: row.try_get("last_activity_at")?,
                archived_at: row.try_get("archived_at")?,
                has_pending_plan: row.try_get::<i64, _>("pending_plans")? > 0,
                activity: serde_json::from_str(&row.try_get::<String, _>("activity")?)?,
                execution: row
                    .try_get::<Option<String>, _>("execution")?
                    .map(|e| serde_json::from_str(&e))
                    .transpose()?,
                agent_state: {
                    let state: String = row.try_get("agent_state")?;
                    AgentState::parse(&state)
                        .ok_or_else(|| StoreError::Corrupt(format!("agent state {state}")))?
                },
            })
        }

        /// Take the row lock of `user_id`'s holding of `bundle` for a session about to use
        /// it; retention drops a holding only under the same lock after checking for
        /// sessions, so the two never cross. The bundle is gone (or was never held): not found.
        async fn hold_bundle(tx: &mut Tx, user_id: &str, bundle: &str) -> StoreResult<()> {
            let held = sqlx::query(
                "UPDATE bundle_owners SET created_at = created_at WHERE sha256 = $1 AND user_id = $2",
            )
            .bind(bundle)
            .bind(user_id)
            .execute(&mut **tx)
            .await?;
            if held.rows_affected() == 0 {
                return Err(StoreError::NotFound("bundle"));
            }
            Ok(())
        }

        fn plan_from_row(row: &DbRow) -> StoreResult<PlanRow> {
            let status: String = row.try_get("status")?;
            let decision: Option<String> = row.try_get("decision")?;
            let revision: i64 = row.try_get("revision")?;
            Ok(PlanRow {
                session_id: row.try_get("session_id")?,
                tool_use_id: row.try_get("tool_use_id")?,
                revision: u32::try_from(revision).unwrap_or(u32::MAX),
                plan: row.try_get("plan")?,
                status: PlanStatus::parse(&status)
                    .ok_or_else(|| StoreError::Corrupt(format!("plan status {status}")))?,
                decision: decision.map(|d| serde_json::from_str(&d)).transpose()?,
                event_id: row.try_get("event_id")?,
                decision_event_id: row.try_get("decision_event_id")?,
                created_at: row.try_get("created_at")?,
                decided_at: row.try_get("decided_at")?,
            })
        }

        fn event_from_row(session_id: &str, row: &DbRow) -> StoreResult<Event> {
            Ok(Event {
                id: row.try_get("id")?,
                session_id: session_id.to_owned(),
                created_at: format_ms(row.try_get("created_at")?),
                body: serde_json::from_str(&row.try_get::<String, _>("body")?)?,
            })
        }

        fn event_kind(body: &EventBody) -> &'static str {
            match body {
                EventBody::Assistant(_) => "assistant",
                EventBody::User(_) => "user",
                EventBody::Result(_) => "result",
                EventBody::System(_) => "system",
                EventBody::ControlRequest(_) => "control_request",
            }
        }

        fn asks_user(body: &EventBody) -> bool {
            let EventBody::Assistant(a) = body else {
                return false;
            };
            a.parent_tool_use_id.is_none()
                && a.message.content.iter().any(|b| {
                    matches!(b, ContentBlock::ToolUse { name, .. } if name == ASK_USER_QUESTION_TOOL)
                })
        }

        async fn set_status_in(tx: &mut Tx, session_id: &str, status: SessionStatus) -> StoreResult<()> {
            sqlx::query(
                "UPDATE sessions SET status = $2, updated_at = $3 \
                 WHERE id = $1 AND status <> 'archived'",
            )
            .bind(session_id)
            .bind(status.as_str())
            .bind(now_ms())
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        async fn insert_plan(
            tx: &mut Tx,
            session_id: &str,
            tool_use_id: &str,
            plan: &str,
            event_id: i64,
            now: i64,
        ) -> StoreResult<()> {
            let exists = sqlx::query("SELECT 1 FROM plans WHERE session_id = $1 AND tool_use_id = $2")
                .bind(session_id)
                .bind(tool_use_id)
                .fetch_optional(&mut **tx)
                .await?;
            if exists.is_some() {
                return Ok(());
            }
            let row = sqlx::query(
                "UPDATE sessions SET plan_revisions = plan_revisions + 1 WHERE id = $1 \
                 RETURNING plan_revisions",
            )
            .bind(session_id)
            .fetch_one(&mut **tx)
            .await?;
            let revision: i64 = row.try_get("plan_revisions")?;
            sqlx::query(
                "INSERT INTO plans (session_id, tool_use_id, revision, plan, status, event_id, \
                 created_at) VALUES ($1, $2, $3, $4, 'pending', $5, $6)",
            )
            .bind(session_id)
            .bind(tool_use_id)
            .bind(revision)
            .bind(plan)
            .bind(event_id)
            .bind(now)
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        /// Append inside an open transaction; see `Store::append_events`.
        async fn append_in(tx: &mut Tx, session_id: &str, events: &[EventBody]) -> StoreResult<Vec<Event>> {
            if events.is_empty() {
                return Ok(Vec::new());
            }
            let now = now_ms();
            let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
            let row = sqlx::query(
                "UPDATE sessions SET last_event_id = last_event_id + $2, updated_at = $3, \
                 last_activity_at = $3 WHERE id = $1 RETURNING last_event_id",
            )
            .bind(session_id)
            .bind(count)
            .bind(now)
            .fetch_optional(&mut **tx)
            .await?
            .ok_or(StoreError::NotFound("session"))?;
            let last: i64 = row.try_get("last_event_id")?;
            fold_activity(tx, session_id, events).await?;
            let mut stored = Vec::with_capacity(events.len());
            for (offset, body) in (0_i64..).zip(events) {
                let id = last - count + 1 + offset;
                sqlx::query(
                    "INSERT INTO events (session_id, id, kind, parent_tool_use_id, body, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(session_id)
                .bind(id)
                .bind(event_kind(body))
                .bind(body.parent_tool_use_id())
                .bind(serde_json::to_string(body)?)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                let calls = body.exit_plan_mode_calls();
                for (tool_use_id, plan) in &calls {
                    insert_plan(tx, session_id, tool_use_id, plan.unwrap_or_default(), id, now).await?;
                }
                if !calls.is_empty() || asks_user(body) {
                    set_status_in(tx, session_id, SessionStatus::RequiresAction).await?;
                }
                stored.push(Event {
                    id,
                    session_id: session_id.to_owned(),
                    created_at: format_ms(now),
                    body: body.clone(),
                });
            }
            Ok(stored)
        }

        /// Fold the events into the session's stored activity (subagents, tool calls).
        async fn fold_activity(tx: &mut Tx, session_id: &str, events: &[EventBody]) -> StoreResult<()> {
            use ultraplan_protocol::activity::Activity;
            if !events.iter().any(Activity::touches) {
                return Ok(());
            }
            let row = sqlx::query("SELECT activity FROM sessions WHERE id = $1")
                .bind(session_id)
                .fetch_one(&mut **tx)
                .await?;
            let mut activity: Activity = serde_json::from_str(&row.try_get::<String, _>("activity")?)?;
            for body in events {
                activity.apply(body);
            }
            sqlx::query("UPDATE sessions SET activity = $2 WHERE id = $1")
                .bind(session_id)
                .bind(serde_json::to_string(&activity)?)
                .execute(&mut **tx)
                .await?;
            Ok(())
        }

        async fn plan_in(tx: &mut Tx, session_id: &str, tool_use_id: &str) -> StoreResult<Option<PlanRow>> {
            let row = sqlx::query(concat!(
                "SELECT ",
                plan_cols!(),
                " FROM plans WHERE session_id = $1 AND tool_use_id = $2"
            ))
            .bind(session_id)
            .bind(tool_use_id)
            .fetch_optional(&mut **tx)
            .await?;
            row.as_ref().map(plan_from_row).transpose()
        }

        async fn decide_in(
            tx: &mut Tx,
            session_id: &str,
            tool_use_id: &str,
            decision: &Decision,
        ) -> StoreResult<DecideOutcome> {
            let now = now_ms();
            let won = sqlx::query(
                "UPDATE plans SET status = $3, decision = $4, decided_at = $5 \
                 WHERE session_id = $1 AND tool_use_id = $2 AND status = 'pending' \
                 RETURNING plan",
            )
            .bind(session_id)
            .bind(tool_use_id)
            .bind(status_for(decision).as_str())
            .bind(serde_json::to_string(decision)?)
            .bind(now)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(won) = won else {
                let Some(plan) = plan_in(tx, session_id, tool_use_id).await? else {
                    return Ok(DecideOutcome::UnknownPlan);
                };
                let same = plan
                    .decision
                    .as_ref()
                    .is_some_and(|d| same_decision(d, decision, &plan.plan));
                return Ok(if same {
                    DecideOutcome::AlreadyStands(plan)
                } else {
                    DecideOutcome::Conflict(plan)
                });
            };
            let proposed: String = won.try_get("plan")?;
            let (content, is_error) = decision_tool_result(decision, &proposed);
            let body = EventBody::tool_result(tool_use_id, content, is_error);
            let mut events = append_in(tx, session_id, std::slice::from_ref(&body)).await?;
            let event = events.pop().ok_or(StoreError::Corrupt("append returned nothing".into()))?;
            sqlx::query(
                "UPDATE plans SET decision_event_id = $3 WHERE session_id = $1 AND tool_use_id = $2",
            )
            .bind(session_id)
            .bind(tool_use_id)
            .bind(event.id)
            .execute(&mut **tx)
            .await?;
            sqlx::query(
                "UPDATE sessions SET status = 'idle', updated_at = $2 \
                 WHERE id = $1 AND status = 'requires_action'",
            )
            .bind(session_id)
            .bind(now)
            .execute(&mut **tx)
            .await?;
            let plan = plan_in(tx, session_id, tool_use_id)
                .await?
                .ok_or(StoreError::NotFound("plan"))?;
            Ok(DecideOutcome::Decided { plan, event: Box::new(event) })
        }

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn pool(&self) -> $crate::store::Pool {
                $crate::store::Pool::$variant(self.pool.clone())
            }

            async fn migrate(&self) -> StoreResult<()> {
                Self::MIGRATOR.run(&self.pool).await?;
                Ok(())
            }

            async fn create_user(&self, name: &str) -> StoreResult<UserRow> {
                let user = UserRow {
                    id: uuid::Uuid::new_v4().to_string(),
                    name: name.to_owned(),
                    created_at: now_ms(),
                };
                sqlx::query("INSERT INTO users (id, name, created_at) VALUES ($1, $2, $3)")
                    .bind(&user.id)
                    .bind(&user.name)
                    .bind(user.created_at)
                    .execute(&self.pool)
                    .await
                    .map_err(|e| map_unique(e, "user"))?;
                Ok(user)
            }

            async fn user_by_name(&self, name: &str) -> StoreResult<Option<UserRow>> {
                let row = sqlx::query("SELECT id, name, created_at FROM users WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|r| {
                    Ok(UserRow {
                        id: r.try_get("id")?,
                        name: r.try_get("name")?,
                        created_at: r.try_get("created_at")?,
                    })
                })
                .transpose()
            }

            async fn add_token(
                &self,
                user_id: &str,
                token_id: &str,
                salt: &str,
                hash: &str,
            ) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO api_tokens (id, user_id, salt, hash, created_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(token_id)
                .bind(user_id)
                .bind(salt)
                .bind(hash)
                .bind(now_ms())
                .execute(&self.pool)
                .await
                .map_err(|e| map_unique(e, "token"))?;
                Ok(())
            }

            async fn token(&self, token_id: &str) -> StoreResult<Option<TokenRow>> {
                let row = sqlx::query(
                    "SELECT t.id, t.user_id, u.name, t.salt, t.hash FROM api_tokens t \
                     JOIN users u ON u.id = t.user_id WHERE t.id = $1",
                )
                .bind(token_id)
                .fetch_optional(&self.pool)
                .await?;
                row.map(|r| {
                    Ok(TokenRow {
                        token_id: r.try_get("id")?,
                        user_id: r.try_get("user_id")?,
                        user_name: r.try_get("name")?,
                        salt: r.try_get("salt")?,
                        hash: r.try_get("hash")?,
                    })
                })
                .transpose()
            }

            async fn put_bundle(&self, user_id: &str, b: &BundleRow) -> StoreResult<()> {
                let mut tx = self.write_tx().await?;
                sqlx::query(
                    "INSERT INTO bundles (sha256, files, bytes, unpacked_bytes, created_at) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING",
                )
                .bind(&b.sha256)
                .bind(b.files)
                .bind(b.bytes)
                .bind(b.unpacked_bytes)
                .bind(b.created_at)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO bundle_owners (sha256, user_id, created_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (sha256, user_id) DO NOTHING",
                )
                .bind(&b.sha256)
                .bind(user_id)
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn owned_bundle(&self, user_id: &str, sha256: &str) -> StoreResult<Option<BundleRow>> {
                let row = sqlx::query(
                    "SELECT b.sha256, b.files, b.bytes, b.unpacked_bytes, b.created_at \
                     FROM bundles b JOIN bundle_owners o ON o.sha256 = b.sha256 \
                     WHERE o.user_id = $1 AND b.sha256 = $2",
                )
                .bind(user_id)
                .bind(sha256)
                .fetch_optional(&self.pool)
                .await?;
                row.map(|r| {
                    Ok(BundleRow {
                        sha256: r.try_get("sha256")?,
                        files: r.try_get("files")?,
                        bytes: r.try_get("bytes")?,
                        unpacked_bytes: r.try_get("unpacked_bytes")?,
                        created_at: r.try_get("created_at")?,
                    })
                })
                .transpose()
            }

            async fn create_session(
                &self,
                new: &NewSession,
                events: &[EventBody],
            ) -> StoreResult<(SessionRow, Vec<Event>)> {
                let now = now_ms();
                let mut tx = self.write_tx().await?;
                if let Some(bundle) = &new.bundle_id {
                    hold_bundle(&mut tx, &new.user_id, bundle).await?;
                }
                sqlx::query(
                    "INSERT INTO sessions (id, user_id, title, bundle_id, status, context, usage, \
                     created_at, updated_at, last_activity_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $8)",
                )
                .bind(&new.id)
                .bind(&new.user_id)
                .bind(&new.title)
                .bind(new.bundle_id.as_deref())
                .bind(new.status.as_str())
                .bind(serde_json::to_string(&new.context)?)
                .bind(serde_json::to_string(&ultraplan_protocol::model::Usage::default())?)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(|e| map_unique(e, "session"))?;
                let stored = append_in(&mut tx, &new.id, events).await?;
                let row = sqlx::query(concat!("SELECT ", session_cols!(), " FROM sessions WHERE id = $1"))
                    .bind(&new.id)
                    .fetch_one(&mut *tx)
                    .await?;
                let session = session_from_row(&row)?;
                tx.commit().await?;
                Ok((session, stored))
            }

            async fn session_for_user(&self, user_id: &str, id: &str) -> StoreResult<Option<SessionRow>> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    session_cols!(),
                    " FROM sessions WHERE id = $1 AND user_id = $2"
                ))
                .bind(id)
                .bind(user_id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(session_from_row).transpose()
            }

            async fn session(&self, id: &str) -> StoreResult<Option<SessionRow>> {
                let row = sqlx::query(concat!("SELECT ", session_cols!(), " FROM sessions WHERE id = $1"))
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.as_ref().map(session_from_row).transpose()
            }

            async fn list_sessions(&self, user_id: &str, limit: u32) -> StoreResult<Vec<SessionRow>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    session_cols!(),
                    " FROM sessions WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
                ))
                .bind(user_id)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(session_from_row).collect()
            }

            async fn sessions_with_status(&self, statuses: &[SessionStatus]) -> StoreResult<Vec<SessionRow>> {
                let mut out = Vec::new();
                for status in statuses {
                    let rows = sqlx::query(concat!(
                        "SELECT ",
                        session_cols!(),
                        " FROM sessions WHERE status = $1"
                    ))
                    .bind(status.as_str())
                    .fetch_all(&self.pool)
                    .await?;
                    for row in &rows {
                        out.push(session_from_row(row)?);
                    }
                }
                out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
                Ok(out)
            }

            async fn append_events(&self, session_id: &str, events: &[EventBody]) -> StoreResult<Vec<Event>> {
                let mut tx = self.write_tx().await?;
                let stored = append_in(&mut tx, session_id, events).await?;
                tx.commit().await?;
                Ok(stored)
            }

            async fn list_events(
                &self,
                session_id: &str,
                after_id: i64,
                limit: u32,
            ) -> StoreResult<(Vec<Event>, bool)> {
                let rows = sqlx::query(
                    "SELECT id, body, created_at FROM events WHERE session_id = $1 AND id > $2 \
                     ORDER BY id LIMIT $3",
                )
                .bind(session_id)
                .bind(after_id)
                .bind(i64::from(limit) + 1)
                .fetch_all(&self.pool)
                .await?;
                let has_more = rows.len() > limit as usize;
                let events = rows
                    .iter()
                    .take(limit as usize)
                    .map(|r| event_from_row(session_id, r))
                    .collect::<StoreResult<Vec<_>>>()?;
                Ok((events, has_more))
            }

            async fn set_status(&self, session_id: &str, status: SessionStatus) -> StoreResult<()> {
                let mut tx = self.write_tx().await?;
                set_status_in(&mut tx, session_id, status).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn archive_session(&self, session_id: &str) -> StoreResult<bool> {
                let now = now_ms();
                let done = sqlx::query(
                    "UPDATE sessions SET status = 'archived', archived_at = $2, updated_at = $2 \
                     WHERE id = $1 AND status <> 'archived'",
                )
                .bind(session_id)
                .bind(now)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn set_agent_state(&self, session_id: &str, state: AgentState) -> StoreResult<()> {
                sqlx::query("UPDATE sessions SET agent_state = $2 WHERE id = $1")
                    .bind(session_id)
                    .bind(state.as_str())
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn set_execution(&self, session_id: &str, execution: &Execution) -> StoreResult<()> {
                sqlx::query("UPDATE sessions SET execution = $2, updated_at = $3 WHERE id = $1")
                    .bind(session_id)
                    .bind(serde_json::to_string(execution)?)
                    .bind(now_ms())
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            async fn save_patch(
                &self,
                session_id: &str,
                diff: &[u8],
                summary: &PatchSummary,
            ) -> StoreResult<()> {
                let now = now_ms();
                let execution = Execution {
                    state: ExecutionState::Finished,
                    patch: Some(summary.clone()),
                };
                let mut tx = self.write_tx().await?;
                sqlx::query(
                    "INSERT INTO patches (session_id, diff, summary, created_at) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (session_id) DO UPDATE \
                     SET diff = excluded.diff, summary = excluded.summary, \
                     created_at = excluded.created_at",
                )
                .bind(session_id)
                .bind(diff)
                .bind(serde_json::to_string(summary)?)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                sqlx::query("UPDATE sessions SET execution = $2, updated_at = $3 WHERE id = $1")
                    .bind(session_id)
                    .bind(serde_json::to_string(&execution)?)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }

            async fn patch(&self, session_id: &str) -> StoreResult<Option<PatchRow>> {
                let row = sqlx::query(
                    "SELECT session_id, diff, summary, created_at FROM patches WHERE session_id = $1",
                )
                .bind(session_id)
                .fetch_optional(&self.pool)
                .await?;
                row.map(|r| {
                    Ok(PatchRow {
                        session_id: r.try_get("session_id")?,
                        diff: r.try_get("diff")?,
                        summary: serde_json::from_str(&r.try_get::<String, _>("summary")?)?,
                        created_at: r.try_get("created_at")?,
                    })
                })
                .transpose()
            }

            async fn sessions_executing(&self) -> StoreResult<Vec<SessionRow>> {
                let executing = serde_json::to_string(&Execution {
                    state: ExecutionState::Executing,
                    patch: None,
                })?;
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    session_cols!(),
                    " FROM sessions WHERE execution = $1 ORDER BY created_at, id"
                ))
                .bind(executing)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(session_from_row).collect()
            }

            async fn sessions_to_recover(&self) -> StoreResult<Vec<SessionRow>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    session_cols!(),
                    " FROM sessions WHERE agent_state IN ('queued', 'running') \
                     AND status <> 'archived' ORDER BY created_at, id"
                ))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(session_from_row).collect()
            }

            async fn record_model_call(&self, call: &ModelCall) -> StoreResult<Usage> {
                let now = now_ms();
                let mut tx = self.write_tx().await?;
                let row = sqlx::query(
                    "UPDATE sessions SET updated_at = $2 WHERE id = $1 RETURNING usage",
                )
                .bind(&call.session_id)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound("session"))?;
                let before: Usage = serde_json::from_str(&row.try_get::<String, _>("usage")?)?;
                let total = before + call.usage;
                sqlx::query("UPDATE sessions SET usage = $2 WHERE id = $1")
                    .bind(&call.session_id)
                    .bind(serde_json::to_string(&total)?)
                    .execute(&mut *tx)
                    .await?;
                let u = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                sqlx::query(
                    "INSERT INTO model_calls (session_id, model, input_tokens, output_tokens, \
                     cache_read_input_tokens, cache_creation_input_tokens, attempts, error, \
                     created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                )
                .bind(&call.session_id)
                .bind(&call.model)
                .bind(u(call.usage.input_tokens))
                .bind(u(call.usage.output_tokens))
                .bind(u(call.usage.cache_read_input_tokens))
                .bind(u(call.usage.cache_creation_input_tokens))
                .bind(i64::from(call.attempts))
                .bind(call.error.as_deref())
                .bind(now)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(total)
            }

            async fn plan(&self, session_id: &str, tool_use_id: &str) -> StoreResult<Option<PlanRow>> {
                let row = sqlx::query(concat!(
                    "SELECT ",
                    plan_cols!(),
                    " FROM plans WHERE session_id = $1 AND tool_use_id = $2"
                ))
                .bind(session_id)
                .bind(tool_use_id)
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref().map(plan_from_row).transpose()
            }

            async fn list_plans(&self, session_id: &str) -> StoreResult<Vec<PlanRow>> {
                let rows = sqlx::query(concat!(
                    "SELECT ",
                    plan_cols!(),
                    " FROM plans WHERE session_id = $1 ORDER BY revision"
                ))
                .bind(session_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(plan_from_row).collect()
            }

            async fn decide_plan(
                &self,
                session_id: &str,
                tool_use_id: &str,
                decision: &Decision,
            ) -> StoreResult<DecideOutcome> {
                let mut tx = self.write_tx().await?;
                let outcome = decide_in(&mut tx, session_id, tool_use_id, decision).await?;
                tx.commit().await?;
                Ok(outcome)
            }

            async fn list_flags(&self) -> StoreResult<Vec<FlagRow>> {
                let rows = sqlx::query(
                    "SELECT name, user_id, value, rollout_pct, updated_at FROM flags \
                     ORDER BY name, user_id",
                )
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        let user: String = r.try_get("user_id")?;
                        let pct: Option<i64> = r.try_get("rollout_pct")?;
                        Ok(FlagRow {
                            name: r.try_get("name")?,
                            user_id: (!user.is_empty()).then_some(user),
                            value: r.try_get("value")?,
                            rollout_pct: pct.map(|p| u8::try_from(p.clamp(0, 100)).unwrap_or(100)),
                            updated_at: r.try_get("updated_at")?,
                        })
                    })
                    .collect()
            }

            async fn set_flag(&self, row: &FlagRow) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO flags (name, user_id, value, rollout_pct, updated_at) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name, user_id) DO UPDATE SET \
                     value = excluded.value, rollout_pct = excluded.rollout_pct, \
                     updated_at = excluded.updated_at",
                )
                .bind(&row.name)
                .bind(row.user_id.as_deref().unwrap_or_default())
                .bind(&row.value)
                .bind(row.rollout_pct.map(i64::from))
                .bind(row.updated_at)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn record_telemetry(
                &self,
                name: &str,
                labels: &serde_json::Value,
                user_id: Option<&str>,
                session_id: Option<&str>,
            ) -> StoreResult<()> {
                sqlx::query(
                    "INSERT INTO telemetry (name, labels, user_id, session_id, created_at) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(name)
                .bind(labels.to_string())
                .bind(user_id)
                .bind(session_id)
                .bind(now_ms())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            async fn count_telemetry(&self, name: &str) -> StoreResult<i64> {
                let row = sqlx::query("SELECT COUNT(*) AS n FROM telemetry WHERE name = $1")
                    .bind(name)
                    .fetch_one(&self.pool)
                    .await?;
                Ok(row.try_get("n")?)
            }
        }
    };
}

pub(crate) use {impl_store, plan_cols, session_cols};
