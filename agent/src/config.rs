//! Agent-side tuning: context-management thresholds and request limits.
//!
//! The defaults suit a 200k-token context window. Each value can be overridden by an
//! environment variable (`ULTRAPLAN_CTX_*`, `ULTRAPLAN_MAX_OUTPUT_TOKENS`,
//! `ULTRAPLAN_MAX_SUBAGENTS`), which the tests use to trigger snipping and compaction on small
//! conversations.

use std::path::PathBuf;

/// Subagents running at once, by default; more wait for a free slot.
pub const DEFAULT_MAX_SUBAGENTS: usize = 4;

/// Thresholds of the context-management transformations (spill, clear, snip, compact), which
/// the `context` module applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextSettings {
    /// Tool results longer than this many characters are written to disk and previewed.
    pub spill_chars: usize,
    /// Lines of a spilled result kept in the preview.
    pub preview_lines: usize,
    /// Characters of a spilled result kept in the preview, at most.
    pub preview_chars: usize,
    /// Tool results of the last this-many assistant turns are always kept whole.
    pub keep_result_turns: usize,
    /// Older results are cleared in steps of this many turns, so the request prefix (and the
    /// provider's prompt cache) changes only once per step.
    pub clear_step_turns: usize,
    /// Estimated tokens above which the middle of the history is snipped.
    pub snip_threshold_tokens: usize,
    /// Estimated tokens of recent history kept when snipping.
    pub snip_keep_tokens: usize,
    /// Estimated tokens above which a summary compaction runs before the next turn.
    pub compact_threshold_tokens: usize,
    /// Estimated tokens of recent history kept verbatim after a compaction.
    pub compact_keep_tokens: usize,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            spill_chars: 40_000,
            preview_lines: 60,
            preview_chars: 6_000,
            keep_result_turns: 8,
            clear_step_turns: 4,
            snip_threshold_tokens: 100_000,
            snip_keep_tokens: 60_000,
            compact_threshold_tokens: 140_000,
            compact_keep_tokens: 16_000,
        }
    }
}

/// Everything the agent is tuned by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    pub context: ContextSettings,
    /// `max_tokens` of every model request.
    pub max_output_tokens: u32,
    /// Where oversized tool results are written (a private tmpfs inside the sandbox).
    pub spill_dir: PathBuf,
    /// Subagents running at once; more wait for a free slot.
    pub max_subagents: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            context: ContextSettings::default(),
            max_output_tokens: 16_384,
            spill_dir: std::env::temp_dir().join("tool-results"),
            max_subagents: DEFAULT_MAX_SUBAGENTS,
        }
    }
}

impl AgentConfig {
    /// The defaults with environment overrides applied; `session_id` names the spill folder.
    pub fn from_env(session_id: &str) -> Self {
        Self::from_lookup(session_id, |key| std::env::var(key).ok())
    }

    /// Like [`AgentConfig::from_env`], reading variables through `lookup`.
    pub fn from_lookup(session_id: &str, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut config = AgentConfig {
            spill_dir: std::env::temp_dir()
                .join(format!("agent-{}", sanitize(session_id)))
                .join("tool-results"),
            ..AgentConfig::default()
        };
        let ctx = &mut config.context;
        let fields: [(&str, &mut usize); 9] = [
            ("ULTRAPLAN_CTX_SPILL_CHARS", &mut ctx.spill_chars),
            ("ULTRAPLAN_CTX_PREVIEW_LINES", &mut ctx.preview_lines),
            ("ULTRAPLAN_CTX_PREVIEW_CHARS", &mut ctx.preview_chars),
            (
                "ULTRAPLAN_CTX_KEEP_RESULT_TURNS",
                &mut ctx.keep_result_turns,
            ),
            ("ULTRAPLAN_CTX_CLEAR_STEP_TURNS", &mut ctx.clear_step_turns),
            ("ULTRAPLAN_CTX_SNIP_TOKENS", &mut ctx.snip_threshold_tokens),
            ("ULTRAPLAN_CTX_SNIP_KEEP_TOKENS", &mut ctx.snip_keep_tokens),
            (
                "ULTRAPLAN_CTX_COMPACT_TOKENS",
                &mut ctx.compact_threshold_tokens,
            ),
            (
                "ULTRAPLAN_CTX_COMPACT_KEEP_TOKENS",
                &mut ctx.compact_keep_tokens,
            ),
        ];
        for (key, field) in fields {
            override_from(&lookup, key, field);
        }
        override_from(
            &lookup,
            "ULTRAPLAN_MAX_OUTPUT_TOKENS",
            &mut config.max_output_tokens,
        );
        override_from(
            &lookup,
            "ULTRAPLAN_MAX_SUBAGENTS",
            &mut config.max_subagents,
        );
        config.context.clear_step_turns = config.context.clear_step_turns.max(1);
        config.max_subagents = config.max_subagents.max(1);
        config
    }
}

fn override_from<T: std::str::FromStr>(
    lookup: &impl Fn(&str) -> Option<String>,
    key: &str,
    field: &mut T,
) {
    let Some(raw) = lookup(key) else { return };
    match raw.trim().parse() {
        Ok(value) => *field = value,
        Err(_) => tracing::warn!(key, value = %raw, "ignoring unparsable setting"),
    }
}

/// Keeps a session id usable as one path component.
fn sanitize(id: &str) -> String {
    let clean: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(64)
        .collect();
    if clean.is_empty() {
        "session".to_owned()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Environment variables set, and a check of the resulting config.
    type Case = (
        &'static [(&'static str, &'static str)],
        fn(&AgentConfig) -> bool,
    );

    #[test]
    fn overrides_apply_and_bad_values_are_ignored() {
        let cases: [Case; 4] = [
            (&[], |c| c.context == ContextSettings::default()),
            (&[("ULTRAPLAN_CTX_SNIP_TOKENS", "500")], |c| {
                c.context.snip_threshold_tokens == 500
            }),
            (&[("ULTRAPLAN_CTX_SNIP_TOKENS", "lots")], |c| {
                c.context.snip_threshold_tokens == 100_000
            }),
            (
                &[
                    ("ULTRAPLAN_MAX_OUTPUT_TOKENS", "1024"),
                    ("ULTRAPLAN_CTX_CLEAR_STEP_TURNS", "0"),
                ],
                |c| c.max_output_tokens == 1024 && c.context.clear_step_turns == 1,
            ),
        ];
        for (vars, check) in cases {
            let config = AgentConfig::from_lookup("s1", |key| {
                vars.iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| (*v).to_owned())
            });
            assert!(check(&config), "{vars:?}: {config:?}");
        }
    }

    #[test]
    fn spill_dir_is_per_session_and_sanitized() {
        let config = AgentConfig::from_lookup("../se ss/1", |_| None);
        let name = config
            .spill_dir
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        assert_eq!(name.as_deref(), Some("agent-sess1"));
        let empty = AgentConfig::from_lookup("///", |_| None);
        assert!(empty.spill_dir.to_string_lossy().contains("agent-session"));
    }
}
