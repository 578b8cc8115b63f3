//! The runner's two loops: claim waiting sessions while slots are free, and renew the leases
//! of the sessions it runs (docs/ARCHITECTURE.md §5.2).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Command, Launch, Orchestrator};
use crate::store::{Claim, now_ms};

/// Claim whenever woken: a session queued here or a slot freed (the kick), another process
/// changed a session (the bell: it may have queued one), and at least every `claim_poll`, which
/// finds lapsed leases.
pub(super) async fn claim_loop(me: Orchestrator) {
    let mut bell = me.inner.state.bell.listen();
    loop {
        me.claim_while_free().await;
        if me.inner.draining.load(Ordering::SeqCst) {
            return;
        }
        let poll = me.inner.settings.claim_poll;
        tokio::select! {
            biased;
            () = me.inner.kick.notified() => {}
            Ok(()) = bell.changed() => {
                // Other processes' changes come in bursts (every append is announced): one
                // claim round per burst.
                tokio::time::sleep(BELL_COALESCE).await;
            }
            () = tokio::time::sleep(poll) => {}
        }
    }
}

/// How long a rung bell waits for the rest of its burst.
const BELL_COALESCE: Duration = Duration::from_millis(20);

/// Renew every lease a third of the way through; give up a session whose lease is lost, or
/// that could not be renewed for two thirds of the lease (the database is away): by then
/// another runner may be about to take it, and its agent must be gone first.
pub(super) async fn heartbeat_loop(me: Orchestrator) {
    let lease = me.inner.settings.lease;
    loop {
        tokio::time::sleep(lease / 3).await;
        me.renew_all(lease).await;
        if me.inner.draining.load(Ordering::SeqCst) && me.live_count() == 0 {
            return;
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Orchestrator {
    async fn claim_while_free(&self) {
        let lease_ms = millis(self.inner.settings.lease);
        loop {
            if self.inner.draining.load(Ordering::SeqCst) {
                return;
            }
            let Ok(permit) = self.inner.slots.clone().try_acquire_owned() else {
                return;
            };
            let store = &self.inner.state.store;
            let claim = match store.claim_session(self.name(), now_ms(), lease_ms).await {
                Ok(Some(claim)) => claim,
                Ok(None) => return,
                Err(error) => {
                    tracing::warn!(%error, "cannot claim sessions");
                    return;
                }
            };
            self.count(&claim);
            let launch = match self.launch_for(&claim).await {
                Ok(launch) => launch,
                Err(error) => {
                    tracing::warn!(session_id = %claim.lease.session_id, %error, "cannot read the session's flags; handing it back");
                    let _ = store.release_lease(&claim.lease, true).await;
                    return;
                }
            };
            self.spawn_task(claim, launch, permit);
        }
    }

    async fn launch_for(&self, claim: &Claim) -> crate::store::StoreResult<Launch> {
        let flags = crate::flags::for_user(&self.inner.state, &claim.session.user_id).await?;
        Ok(Launch {
            timeout_seconds: flags.timeout_seconds,
            resumed: claim.resumed,
        })
    }

    fn count(&self, claim: &Claim) {
        let counters = &self.inner.state.counters;
        counters.inc("claims", &[]);
        let waited = u64::try_from(claim.waited_ms).unwrap_or(0);
        counters.add("claim_wait_milliseconds", &[], waited);
        if claim.took_over {
            counters.inc("lease_expiries", &[]);
        }
        tracing::info!(
            session_id = %claim.lease.session_id,
            runner = self.name(),
            epoch = claim.lease.epoch,
            waited_ms = claim.waited_ms,
            resumed = claim.resumed,
            took_over = claim.took_over,
            "claimed a session"
        );
    }

    /// Renew every held lease at once, each bounded by its own deadline: a renewal the
    /// database does not answer (it is away, or the pool waits for a connection) must not
    /// hold up giving up that session, nor any other.
    async fn renew_all(&self, lease: Duration) {
        let held: Vec<_> = self.live().values().cloned().collect();
        futures_util::future::join_all(held.into_iter().map(|live| self.renew(live, lease))).await;
    }

    async fn renew(&self, live: super::Live, lease: Duration) {
        let store = &self.inner.state.store;
        let now = now_ms();
        let give_up_at = live.renewed_ms.load(Ordering::Relaxed) + millis(lease) * 2 / 3;
        let left = Duration::from_millis(u64::try_from(give_up_at - now).unwrap_or(0));
        let renewed =
            tokio::time::timeout(left, store.renew_lease(&live.lease, now + millis(lease)));
        let session_id = &live.lease.session_id;
        match renewed.await {
            Ok(Ok(true)) => live.renewed_ms.store(now, Ordering::Relaxed),
            Ok(Ok(false)) => {
                tracing::warn!(
                    session_id,
                    epoch = live.lease.epoch,
                    "the lease was lost; stopping the agent"
                );
                let _ = live.commands.send(Command::Lost);
            }
            Ok(Err(error)) => {
                if now_ms() >= give_up_at {
                    tracing::warn!(session_id, %error, "the lease was lost: it could not be renewed in time; stopping the agent");
                    let _ = live.commands.send(Command::Lost);
                }
            }
            Err(_) => {
                // Also the path of a runner that was frozen past its deadline: it stops at once,
                // without asking a database whose answer could no longer make it safe to go on.
                tracing::warn!(
                    session_id,
                    "the lease was lost: it could not be renewed in time; stopping the agent"
                );
                let _ = live.commands.send(Command::Lost);
            }
        }
    }
}
