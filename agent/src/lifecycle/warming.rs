//! The agent's side of the cache warm-up (`warm_up` holds the decisions): sending a warm-up
//! for children that start together, and starting them when it returns.

use ultraplan_protocol::model::{ModelError, ModelResponse};

use super::child::Child;
use super::warm_up::{self, Shared};
use super::{Agent, Effect, Owner};
use crate::context::Prefix;

impl Agent {
    /// Sends one warm-up request (the first member's own first request, `max_tokens: 1`) for
    /// each group of `starting` children that share a prefix worth warming; returns the
    /// children that wait for one.
    pub(super) fn warm_up(&mut self, starting: &[String], out: &mut Vec<Effect>) -> Vec<String> {
        let children: Vec<(&String, &Child)> = starting
            .iter()
            .filter_map(|id| Some((id, self.team.child(id)?)))
            .collect();
        let keys: Vec<&Prefix> = children.iter().map(|(_, c)| c.prefix()).collect();
        let mut warm_ups = Vec::new();
        for group in warm_up::groups(&keys) {
            let first = children[group[0]].1;
            let (shared, mut cached) = first.shared_tokens();
            if self.team.written_recently(first.prefix(), self.now_ms) {
                cached = cached.max(first.prefix().tokens()).min(shared);
            }
            let decision = Shared {
                members: group.len(),
                new_tokens: shared - cached,
                cached_tokens: cached,
            };
            if !warm_up::worth_warming(decision) {
                continue;
            }
            let mut request = first.request(&self.config);
            request.max_tokens = 1;
            let ids: Vec<String> = group.iter().map(|&i| children[i].0.clone()).collect();
            tracing::info!(
                members = ids.len(),
                ?decision,
                "warming the prompt cache for subagents"
            );
            warm_ups.push((ids, request));
        }
        let mut warming = Vec::new();
        for (ids, request) in warm_ups {
            let request_id = self.ids.request();
            warming.extend(ids.iter().cloned());
            self.requests.insert(request_id.clone(), Owner::WarmUp(ids));
            out.push(Effect::Request {
                request_id,
                request,
            });
        }
        warming
    }

    /// The warm-up of `task_ids` returned: they start now. A failed warm-up only costs the
    /// cache reads; the children start all the same.
    pub(super) fn on_warmed(
        &mut self,
        task_ids: Vec<String>,
        result: Result<ModelResponse, ModelError>,
        out: &mut Vec<Effect>,
    ) {
        match &result {
            Ok(response) => {
                self.usage = self.usage + response.usage;
                if let Some(child) = task_ids.first().and_then(|id| self.team.child(id)) {
                    let prefix = child.prefix().clone();
                    self.team.note_written(prefix, self.now_ms);
                }
            }
            Err(error) => {
                tracing::warn!(%error.message, "cache warm-up failed; subagents start anyway")
            }
        }
        for task_id in &task_ids {
            self.start_child(task_id, out);
        }
    }
}
