//! Feature flags: a global default, an optional per-user override, and an optional percentage
//! rollout by a stable hash of the user id. Resolution is pure; rows come from the store.

use sha2::{Digest, Sha256};
use ultraplan_protocol::api::EffectiveFlags;
use ultraplan_protocol::constants::DEFAULT_TIMEOUT_SECONDS;
use ultraplan_protocol::session::PromptVariant;

use crate::config::model_problem;
use crate::core::Core;
use crate::store::{FlagRow, StoreResult};

/// The flags the server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    UltraplanEnabled,
    PromptVariant,
    TimeoutSeconds,
    Model,
}

impl Flag {
    /// Every flag, in listing order.
    pub const ALL: [Flag; 4] = [
        Flag::UltraplanEnabled,
        Flag::PromptVariant,
        Flag::TimeoutSeconds,
        Flag::Model,
    ];

    /// The flag's name.
    pub fn name(self) -> &'static str {
        match self {
            Flag::UltraplanEnabled => "ultraplan_enabled",
            Flag::PromptVariant => "prompt_variant",
            Flag::TimeoutSeconds => "timeout_seconds",
            Flag::Model => "model",
        }
    }

    /// Look a flag up by name.
    pub fn parse(name: &str) -> Option<Flag> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Check a value before it is stored.
    pub fn validate(self, value: &str) -> Result<(), String> {
        match self {
            Flag::UltraplanEnabled => match value {
                "true" | "false" => Ok(()),
                _ => Err("ultraplan_enabled is true or false".to_owned()),
            },
            Flag::PromptVariant => PromptVariant::parse(value).map(|_| ()).ok_or_else(|| {
                let names: Vec<_> = PromptVariant::ALL.iter().map(|v| v.as_str()).collect();
                format!("prompt_variant is one of {}", names.join(", "))
            }),
            Flag::TimeoutSeconds => match value.parse::<u64>() {
                Ok(n) if (1..=86_400).contains(&n) => Ok(()),
                _ => Err("timeout_seconds is a whole number from 1 to 86400".to_owned()),
            },
            Flag::Model => match model_problem(value, true, true) {
                None => Ok(()),
                Some(problem) => Err(problem),
            },
        }
    }
}

/// Built-in defaults; `model` defaults to the server's configured model.
#[derive(Debug, Clone)]
pub struct Defaults {
    pub model: String,
}

impl Defaults {
    fn value(&self, flag: Flag) -> String {
        match flag {
            Flag::UltraplanEnabled => "true".to_owned(),
            Flag::PromptVariant => PromptVariant::default().as_str().to_owned(),
            Flag::TimeoutSeconds => DEFAULT_TIMEOUT_SECONDS.to_string(),
            Flag::Model => self.model.clone(),
        }
    }
}

/// Stable bucket 0..100 of a user for a flag.
pub fn rollout_bucket(flag: Flag, user_id: &str) -> u8 {
    let digest = Sha256::digest(format!("{}:{user_id}", flag.name()).as_bytes());
    let mut first = [0_u8; 8];
    first.copy_from_slice(&digest[..8]);
    u8::try_from(u64::from_be_bytes(first) % 100).unwrap_or(0)
}

/// The value of `flag` for `user_id`: the user's override, else the global value if the user
/// falls inside its rollout, else the built-in default.
pub fn resolve(flag: Flag, user_id: &str, rows: &[FlagRow], defaults: &Defaults) -> String {
    let of_flag = || rows.iter().filter(|r| r.name == flag.name());
    if let Some(row) = of_flag().find(|r| r.user_id.as_deref() == Some(user_id)) {
        return row.value.clone();
    }
    if let Some(row) = of_flag().find(|r| r.user_id.is_none()) {
        let inside = row
            .rollout_pct
            .is_none_or(|pct| rollout_bucket(flag, user_id) < pct);
        if inside {
            return row.value.clone();
        }
    }
    defaults.value(flag)
}

/// Every flag in force for a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserFlags {
    pub enabled: bool,
    pub prompt_variant: PromptVariant,
    pub timeout_seconds: u64,
    pub model: String,
}

impl UserFlags {
    /// Resolve all flags for a user.
    pub fn resolve(user_id: &str, rows: &[FlagRow], defaults: &Defaults) -> Self {
        let get = |flag| resolve(flag, user_id, rows, defaults);
        UserFlags {
            enabled: get(Flag::UltraplanEnabled) == "true",
            prompt_variant: PromptVariant::parse(&get(Flag::PromptVariant)).unwrap_or_default(),
            timeout_seconds: get(Flag::TimeoutSeconds)
                .parse()
                .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
            model: get(Flag::Model),
        }
    }

    /// The part clients see.
    pub fn effective(&self) -> EffectiveFlags {
        EffectiveFlags {
            prompt_variant: self.prompt_variant.as_str().to_owned(),
            timeout_seconds: self.timeout_seconds,
            model: self.model.clone(),
        }
    }
}

/// The flags in force for a user: the stored rows resolved over the configured defaults.
pub async fn for_user(core: &Core, user_id: &str) -> StoreResult<UserFlags> {
    let rows = core.store.list_flags().await?;
    let defaults = Defaults {
        model: core.config.model.clone(),
    };
    Ok(UserFlags::resolve(user_id, &rows, &defaults))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, user: Option<&str>, value: &str, pct: Option<u8>) -> FlagRow {
        FlagRow {
            name: name.to_owned(),
            user_id: user.map(str::to_owned),
            value: value.to_owned(),
            rollout_pct: pct,
            updated_at: 0,
        }
    }

    fn defaults() -> Defaults {
        Defaults {
            model: "offline".to_owned(),
        }
    }

    #[test]
    fn resolution_prefers_user_then_rollout_then_default() {
        let rows = vec![
            row("prompt_variant", None, "visual_plan", None),
            row(
                "prompt_variant",
                Some("u1"),
                "three_subagents_with_critique",
                None,
            ),
            row("timeout_seconds", None, "600", Some(0)),
            row("model", None, "anthropic:x", Some(100)),
        ];
        let cases = [
            (Flag::PromptVariant, "u1", "three_subagents_with_critique"),
            (Flag::PromptVariant, "u2", "visual_plan"),
            (Flag::TimeoutSeconds, "u2", "1800"),
            (Flag::Model, "u2", "anthropic:x"),
            (Flag::UltraplanEnabled, "u2", "true"),
        ];
        for (flag, user, want) in cases {
            assert_eq!(
                resolve(flag, user, &rows, &defaults()),
                want,
                "{flag:?} {user}"
            );
        }
    }

    #[test]
    fn rollout_is_stable_and_roughly_proportional() {
        let rows = vec![row("prompt_variant", None, "visual_plan", Some(30))];
        let inside = (0..1000)
            .filter(|i| {
                let user = format!("user-{i}");
                let first = resolve(Flag::PromptVariant, &user, &rows, &defaults());
                let again = resolve(Flag::PromptVariant, &user, &rows, &defaults());
                assert_eq!(first, again);
                first == "visual_plan"
            })
            .count();
        assert!(
            (200..400).contains(&inside),
            "{inside} of 1000 inside a 30% rollout"
        );
    }

    #[test]
    fn values_are_validated() {
        let cases = [
            (Flag::UltraplanEnabled, "false", true),
            (Flag::UltraplanEnabled, "yes", false),
            (Flag::PromptVariant, "visual_plan", true),
            (Flag::PromptVariant, "fancy", false),
            (Flag::TimeoutSeconds, "1800", true),
            (Flag::TimeoutSeconds, "0", false),
            (Flag::TimeoutSeconds, "90000", false),
            (Flag::TimeoutSeconds, "abc", false),
            (Flag::Model, "offline", true),
            (Flag::Model, "openai:gpt-4.1", true),
            (Flag::Model, "gpt", false),
        ];
        for (flag, value, ok) in cases {
            assert_eq!(flag.validate(value).is_ok(), ok, "{flag:?}={value}");
        }
    }
}
