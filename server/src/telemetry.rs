//! Telemetry: each event is a row in the store and a counter in `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use ultraplan_protocol::events::EventBody;

use crate::store::Store;

/// Telemetry event names (`launched`, `create_failed{reason}`, `awaiting_input`,
/// `approved{execution_target}`, `failed{reason}`).
pub mod names {
    pub const LAUNCHED: &str = "launched";
    pub const CREATE_FAILED: &str = "create_failed";
    pub const AWAITING_INPUT: &str = "awaiting_input";
    pub const APPROVED: &str = "approved";
    pub const FAILED: &str = "failed";
}

/// A counter's name and label pairs.
type CounterKey = (String, Vec<(String, String)>);

/// In-process counters rendered as Prometheus text.
#[derive(Debug, Default)]
pub struct Counters {
    values: Mutex<BTreeMap<CounterKey, u64>>,
}

impl Counters {
    /// Add one to a counter.
    pub fn inc(&self, name: &str, labels: &[(&str, &str)]) {
        self.add(name, labels, 1);
    }

    /// Add `n` to a counter.
    pub fn add(&self, name: &str, labels: &[(&str, &str)], n: u64) {
        let key = (
            name.to_owned(),
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        *values.entry(key).or_default() += n;
    }

    /// Prometheus text exposition of every counter, plus the given gauges.
    pub fn render(&self, gauges: &[(&str, &str, f64)]) -> String {
        let values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let mut last_name = None;
        for ((name, labels), value) in values.iter() {
            let metric = format!("ultraplan_{name}_total");
            if last_name.as_deref() != Some(metric.as_str()) {
                let _ = writeln!(out, "# TYPE {metric} counter");
                last_name = Some(metric.clone());
            }
            let _ = writeln!(out, "{metric}{} {value}", render_labels(labels));
        }
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP ultraplan_{name} {help}");
            let _ = writeln!(out, "# TYPE ultraplan_{name} gauge");
            let _ = writeln!(out, "ultraplan_{name} {value}");
        }
        out
    }
}

fn render_labels(labels: &[(String, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Record a telemetry event: a store row and a counter. Failure to store is logged, never
/// returned: telemetry must not break a request.
pub async fn record(
    store: &dyn Store,
    counters: &Counters,
    name: &str,
    labels: &[(&str, &str)],
    user_id: Option<&str>,
    session_id: Option<&str>,
) {
    counters.inc(name, labels);
    let json: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .collect();
    if let Err(error) = store
        .record_telemetry(name, &json.into(), user_id, session_id)
        .await
    {
        tracing::warn!(%error, name, "could not store telemetry");
    }
}

/// The telemetry event a log event counts as, with its labels: a main-agent call that waits on
/// the user, or a terminal failure.
pub fn for_event(body: &EventBody) -> Option<(&'static str, Vec<(&'static str, String)>)> {
    match body {
        EventBody::Assistant(_) => {
            let waits = !body.user_waits().is_empty();
            waits.then(|| (names::AWAITING_INPUT, Vec::new()))
        }
        EventBody::Result(r) if r.is_terminal() => {
            Some((names::FAILED, vec![("reason", r.subtype.clone())]))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_as_prometheus_text() {
        let counters = Counters::default();
        counters.inc("launched", &[]);
        counters.inc("launched", &[]);
        counters.inc("create_failed", &[("reason", "bad \"bundle\"")]);
        let text = counters.render(&[("sessions_active", "Sessions not archived.", 3.0)]);
        assert!(
            text.contains("# TYPE ultraplan_launched_total counter\nultraplan_launched_total 2\n")
        );
        assert!(text.contains("ultraplan_create_failed_total{reason=\"bad \\\"bundle\\\"\"} 1"));
        assert!(text.contains("ultraplan_sessions_active 3"));
    }
}
