//! Several server processes on one PostgreSQL database: what one changes, the others learn
//! at once. Every session write is announced (`NOTIFY`, see `store::Store::announce`); this
//! follows the announcements of the others, forgets what the cache remembers of the session
//! and wakes its long polls, so no process answers "nothing new" after another appended
//! (docs/ARCHITECTURE.md §5).

use std::time::Duration;

use crate::core::Core;
use crate::store::{Change, Changes};

/// How long to wait before listening again when the database cannot be reached.
const RETRY: Duration = Duration::from_secs(1);

/// Follow `changes` for the life of the runtime.
pub fn follow(core: Core, changes: Changes) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(core, changes))
}

async fn run(core: Core, mut changes: Changes) {
    loop {
        match changes.next().await {
            Ok(Change::Session(id)) => {
                core.store.forget(&id);
                core.hub.notify(&id, 0);
                core.bell.ring();
            }
            Ok(Change::Missed) => {
                tracing::info!("lost the database's announcements for a moment; forgetting all");
                core.store.forget_all();
                core.hub.notify_all();
                core.bell.ring();
            }
            Err(error) => {
                tracing::warn!(%error, "cannot follow other processes' changes; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}
