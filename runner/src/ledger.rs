//! The runner's own record of the agents it ran: one JSON line when each starts and when it
//! ends. It is the runner's word, independent of the server's log, on which agents were alive
//! when (what proves a session never had two live agents across runners).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

/// One line of the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub session_id: String,
    pub epoch: i64,
    /// `start` or `end`.
    pub event: String,
    /// Milliseconds since the epoch.
    pub at_ms: i64,
}

pub(crate) struct Ledger {
    path: PathBuf,
    write: tokio::sync::Mutex<()>,
}

impl Ledger {
    pub(crate) fn at(data_dir: &Path) -> Self {
        Ledger {
            path: data_dir.join("agents.jsonl"),
            write: tokio::sync::Mutex::new(()),
        }
    }

    /// Append an entry; a ledger that cannot be written is logged, never fatal.
    pub(crate) async fn record(&self, session_id: &str, epoch: i64, event: &str) {
        let entry = LedgerEntry {
            session_id: session_id.to_owned(),
            epoch,
            event: event.to_owned(),
            at_ms: now_ms(),
        };
        let Ok(mut line) = serde_json::to_vec(&entry) else {
            return;
        };
        line.push(b'\n');
        let _guard = self.write.lock().await;
        let written = async {
            let mut file = tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .await?;
            file.write_all(&line).await?;
            file.flush().await
        };
        if let Err(error) = written.await {
            tracing::warn!(%error, path = %self.path.display(), "cannot write the agent ledger");
        }
    }
}

/// The entries of the ledger in `data_dir` (empty when there is none).
pub fn read_ledger(data_dir: &Path) -> std::io::Result<Vec<LedgerEntry>> {
    let text = match std::fs::read_to_string(data_dir.join("agents.jsonl")) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_are_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::at(dir.path());
        ledger.record("s1", 1, "start").await;
        ledger.record("s1", 1, "end").await;
        let entries = read_ledger(dir.path()).unwrap();
        let events: Vec<_> = entries
            .iter()
            .map(|e| (e.epoch, e.event.as_str()))
            .collect();
        assert_eq!(events, [(1, "start"), (1, "end")]);
    }
}
