//! Upload slots: each bundle upload holds one from before its body is read until it is
//! stored or refused. A user may hold a few at once (one more is refused at once with 429
//! `too_many_uploads`); the server holds a fixed number overall (one more waits briefly, then
//! gets 503 `uploads_busy`). Uploads validate on a blocking thread, so the global number
//! also bounds the blocking threads that uploads hold, whatever clients do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::UploadSlots;
use crate::http::error::ApiError;

/// The slots of the server.
#[derive(Debug)]
pub struct UploadGate {
    slots: UploadSlots,
    global: Arc<Semaphore>,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// One upload's slots (the user's and the global one), given back on drop.
#[derive(Debug)]
pub struct UploadPermit {
    _user: UserSlot,
    _global: OwnedSemaphorePermit,
}

/// A user's claim on one of their slots.
#[derive(Debug)]
struct UserSlot {
    user: String,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for UserSlot {
    fn drop(&mut self) {
        release(&self.held, &self.user);
    }
}

fn release(held: &Mutex<HashMap<String, usize>>, user: &str) {
    let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(count) = held.get_mut(user) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            held.remove(user);
        }
    }
}

impl UploadGate {
    pub fn new(slots: UploadSlots) -> Self {
        UploadGate {
            slots,
            global: Arc::new(Semaphore::new(slots.global.max(1))),
            held: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Uploads running now (for tests and metrics).
    pub fn running(&self) -> usize {
        self.slots.global.max(1) - self.global.available_permits()
    }

    /// Take a slot for one upload of `user`.
    pub async fn acquire(&self, user: &str) -> Result<UploadPermit, ApiError> {
        let claim = self.claim(user)?;
        let global = Arc::clone(&self.global);
        let permit = match tokio::time::timeout(self.slots.wait, global.acquire_owned()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(user, global = self.slots.global, "upload slots all taken");
                return Err(ApiError::Throttled {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    code: "uploads_busy",
                    message: "the server is receiving as many uploads as it can; retry shortly"
                        .to_owned(),
                    retry_after: Some(Duration::from_secs(5)),
                });
            }
        };
        Ok(UploadPermit {
            _user: claim,
            _global: permit,
        })
    }

    /// Count one more upload for `user`, unless they hold all of theirs.
    fn claim(&self, user: &str) -> Result<UserSlot, ApiError> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(user.to_owned()).or_insert(0);
        if *count >= self.slots.per_user.max(1) {
            let per_user = self.slots.per_user.max(1);
            return Err(ApiError::Throttled {
                status: StatusCode::TOO_MANY_REQUESTS,
                code: "too_many_uploads",
                message: format!(
                    "you already have {per_user} uploads in progress; wait for one to finish"
                ),
                retry_after: Some(Duration::from_secs(2)),
            });
        }
        *count += 1;
        Ok(UserSlot {
            user: user.to_owned(),
            held: Arc::clone(&self.held),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(result: &Result<UploadPermit, ApiError>) -> Option<(StatusCode, &'static str)> {
        match result {
            Ok(_) => None,
            Err(ApiError::Throttled { status, code, .. }) => Some((*status, *code)),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn users_and_the_server_each_have_a_bound() {
        let gate = UploadGate::new(UploadSlots {
            per_user: 2,
            global: 3,
            wait: Duration::from_secs(1),
        });
        let a1 = gate.acquire("a").await;
        let a2 = gate.acquire("a").await;
        let a3 = gate.acquire("a").await;
        assert!(a1.is_ok() && a2.is_ok());
        assert_eq!(
            status(&a3),
            Some((StatusCode::TOO_MANY_REQUESTS, "too_many_uploads"))
        );
        let b1 = gate.acquire("b").await;
        assert!(b1.is_ok());
        assert_eq!(gate.running(), 3);
        // The server is full: b waits, then is told to come back.
        let b2 = gate.acquire("b").await;
        assert_eq!(
            status(&b2),
            Some((StatusCode::SERVICE_UNAVAILABLE, "uploads_busy"))
        );
        // A refused wait gave b's claim back: b still holds one slot of two.
        drop(a1);
        let b3 = gate.acquire("b").await;
        assert!(b3.is_ok());
        drop((a2, b1, b3));
        assert_eq!(gate.running(), 0);
        assert!(gate.held.lock().expect("lock").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_upload_gets_a_slot_freed_within_the_wait() {
        let gate = Arc::new(UploadGate::new(UploadSlots {
            per_user: 4,
            global: 1,
            wait: Duration::from_secs(10),
        }));
        let first = gate.acquire("a").await.expect("slot");
        let waiter = {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move { gate.acquire("b").await.map(|_| ()) })
        };
        tokio::time::sleep(Duration::from_secs(3)).await;
        drop(first);
        assert!(waiter.await.expect("join").is_ok());
    }
}
