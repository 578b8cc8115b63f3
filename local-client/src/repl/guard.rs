//! The launch guard of the interactive prompt: one session at a time. A prompt that would
//! launch while another launch is under way, or while a session is still being polled, is
//! refused with a message.

use crate::state::SessionState;

/// Why a launch is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Busy {
    Launching,
    Polling { session_id: String },
}

impl Busy {
    /// The message the user sees.
    pub fn message(&self) -> String {
        match self {
            Busy::Launching => {
                "ultraplan is already launching a session; wait for it to finish.".to_owned()
            }
            Busy::Polling { session_id } => format!(
                "ultraplan is already polling session {session_id}; wait for it to finish, or \
                 run `ultraplan stop {session_id}`."
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Activity {
    #[default]
    Idle,
    Launching,
    Polling {
        session_id: String,
    },
}

/// What the prompt is doing about ultraplan sessions.
#[derive(Debug, Clone, Default)]
pub struct LaunchGuard {
    activity: Activity,
}

impl LaunchGuard {
    /// Claims the right to launch, or says why not.
    pub fn try_begin(&mut self) -> Result<(), Busy> {
        match &self.activity {
            Activity::Idle => {
                self.activity = Activity::Launching;
                Ok(())
            }
            Activity::Launching => Err(Busy::Launching),
            Activity::Polling { session_id } => Err(Busy::Polling {
                session_id: session_id.clone(),
            }),
        }
    }

    /// The launch created a session; its watcher now polls it.
    pub fn launched(&mut self, session_id: &str) {
        self.activity = Activity::Polling {
            session_id: session_id.to_owned(),
        };
    }

    /// The launch failed or was cancelled.
    pub fn launch_failed(&mut self) {
        self.activity = Activity::Idle;
    }

    /// Updates from the polled session's state: once its watch ended (or its watcher is gone),
    /// a new launch is allowed.
    pub fn refresh(&mut self, state: Option<&SessionState>) {
        if let Activity::Polling { .. } = self.activity {
            let over =
                state.is_none_or(|s| s.is_final() || (s.pid.is_some() && !s.watcher_alive()));
            if over {
                self.activity = Activity::Idle;
            }
        }
    }

    /// The session being polled.
    pub fn polling(&self) -> Option<&str> {
        match &self.activity {
            Activity::Polling { session_id } => Some(session_id),
            _ => None,
        }
    }

    pub fn is_launching(&self) -> bool {
        self.activity == Activity::Launching
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Outcome;

    #[test]
    fn one_launch_at_a_time() {
        let mut guard = LaunchGuard::default();
        assert!(guard.try_begin().is_ok());
        assert_eq!(guard.try_begin(), Err(Busy::Launching));
        assert!(Busy::Launching.message().contains("already launching"));
        guard.launched("s1");
        let busy = guard.try_begin().unwrap_err();
        assert!(busy.message().contains("already polling session s1"));
        let mut state = SessionState::new("s1", "h", "u", "t");
        state.pid = Some(std::process::id());
        guard.refresh(Some(&state));
        assert_eq!(guard.polling(), Some("s1"), "a live watcher keeps polling");
        state.outcome = Some(Outcome::Approved);
        guard.refresh(Some(&state));
        assert!(guard.try_begin().is_ok());
        guard.launch_failed();
        assert!(guard.try_begin().is_ok());
    }
}
