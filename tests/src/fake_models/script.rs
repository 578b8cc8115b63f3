//! Scripts: what a fake answers, turn by turn. Steps are consumed in arrival order; a step may be
//! a fixed [`Reply`] or a closure that looks at the request (e.g. its last tool result).

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::record::RecordedRequest;
use super::reply::{ApiError, ErrorKind, Reply};

type ReplyFn = Arc<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

enum Step {
    Fixed(Reply),
    Dynamic(ReplyFn),
}

/// A queue of steps, then an optional fallback used for every further request. When both are
/// spent the fake answers HTTP 500 `api_error` "fake script exhausted".
#[derive(Clone, Default)]
pub struct Script {
    inner: Arc<Mutex<ScriptState>>,
}

#[derive(Default)]
struct ScriptState {
    steps: VecDeque<Step>,
    otherwise: Option<ReplyFn>,
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("Script")
            .field("steps_left", &state.steps.len())
            .field("has_fallback", &state.otherwise.is_some())
            .finish()
    }
}

impl Script {
    /// An empty script: every request gets "fake script exhausted".
    pub fn new() -> Self {
        Script::default()
    }

    /// These replies, in order.
    pub fn replies(replies: impl IntoIterator<Item = Reply>) -> Self {
        replies.into_iter().fold(Script::new(), Script::then)
    }

    /// Answer every request with this closure.
    pub fn from_fn(f: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> Self {
        Script::new().otherwise(f)
    }

    /// Answer every request with a clone of this reply.
    pub fn always(reply: Reply) -> Self {
        Script::from_fn(move |_| reply.clone())
    }

    /// Append a fixed reply.
    pub fn then(self, reply: Reply) -> Self {
        self.lock().steps.push_back(Step::Fixed(reply));
        self
    }

    /// Append a step computed from the request it answers.
    pub fn then_fn(self, f: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> Self {
        self.lock().steps.push_back(Step::Dynamic(Arc::new(f)));
        self
    }

    /// Answer with this closure once the queued steps are spent.
    pub fn otherwise(self, f: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> Self {
        self.lock().otherwise = Some(Arc::new(f));
        self
    }

    /// Queue a reply while the fake is running.
    pub fn push(&self, reply: Reply) {
        self.lock().steps.push_back(Step::Fixed(reply));
    }

    /// Steps not yet consumed.
    pub fn remaining(&self) -> usize {
        self.lock().steps.len()
    }

    /// The reply for this request. Closures run outside the lock.
    pub(crate) fn next(&self, request: &RecordedRequest) -> Reply {
        let step = {
            let mut state = self.lock();
            match state.steps.pop_front() {
                Some(step) => step,
                None => match &state.otherwise {
                    Some(f) => Step::Dynamic(Arc::clone(f)),
                    None => Step::Fixed(exhausted()),
                },
            }
        };
        match step {
            Step::Fixed(reply) => reply,
            Step::Dynamic(f) => f(request),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScriptState> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn exhausted() -> Reply {
    Reply::Error(ApiError::new(ErrorKind::Server).with_message("fake script exhausted"))
}
