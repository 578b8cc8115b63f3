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

/// After the listener failed to reach the database, how long its next wait may stay pending
/// before it is known to listen again: longer than the pool's acquire timeout (5 s, in
/// `store/postgres.rs`), within which a reconnection that cannot reach the database fails.
const SETTLED: Duration = Duration::from_secs(7);

/// Follow `changes` for the life of the runtime.
pub fn follow(core: Core, changes: Changes) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(core, changes))
}

async fn run(core: Core, mut changes: Changes) {
    // Set when the listener could not reach the database. It then reconnects inside its next
    // wait without saying so, and what others announced before it listened again is lost:
    // everything is forgotten once it listens again (its first announcement, or a wait that
    // outlasts a failing reconnection), as after a dropped connection.
    let mut lost = false;
    loop {
        let next = if lost {
            tokio::time::timeout(SETTLED, changes.next())
                .await
                .unwrap_or(Ok(Change::Missed))
        } else {
            changes.next().await
        };
        match next {
            Ok(change) => match forgetting(change, lost) {
                Forget::Session(id) => {
                    core.store.forget(&id);
                    core.hub.notify(&id, 0);
                    core.bell.ring();
                }
                Forget::All => {
                    lost = false;
                    tracing::info!(
                        "lost the database's announcements for a moment; forgetting all"
                    );
                    core.store.forget_all();
                    core.hub.notify_all();
                    core.bell.ring();
                }
            },
            Err(error) => {
                lost = true;
                tracing::warn!(%error, "cannot follow other processes' changes; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// What a change makes this process forget.
#[derive(Debug, PartialEq, Eq)]
enum Forget {
    Session(String),
    All,
}

/// An announcement forgets its session; a missed stretch, or the first word from a listener
/// that was `lost`, forgets everything.
fn forgetting(change: Change, lost: bool) -> Forget {
    match change {
        Change::Session(id) if !lost => Forget::Session(id),
        _ => Forget::All,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_change_forgets() {
        let session = || Change::Session("s1".to_owned());
        let cases = [
            (session(), false, Forget::Session("s1".to_owned())),
            (session(), true, Forget::All),
            (Change::Missed, false, Forget::All),
            (Change::Missed, true, Forget::All),
        ];
        for (change, lost, want) in cases {
            assert_eq!(
                forgetting(change.clone(), lost),
                want,
                "{change:?} lost={lost}"
            );
        }
    }
}
