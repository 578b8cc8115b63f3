//! The model names a server can be configured with, parsed in one place: `anthropic:<id>`,
//! `openai:<id>` (the id may itself contain `:`, as in `openai:org/model:tag`) and `offline`,
//! the built-in deterministic planner.

use std::fmt;
use std::str::FromStr;

/// The model name of the built-in offline planner.
pub const OFFLINE_MODEL: &str = "offline";

/// A parsed model name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// `anthropic:<id>`: Anthropic's Messages API.
    Anthropic(String),
    /// `openai:<id>`: an OpenAI-compatible Chat Completions API.
    OpenAi(String),
    /// `offline`: the built-in planner; no provider, no key.
    Offline,
}

/// A model name that is none of the known forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown model '{model}': use anthropic:<model>, openai:<model> or offline")]
pub struct ModelSpecError {
    /// The name as given.
    pub model: String,
}

impl ModelSpec {
    /// Parse `anthropic:<id>`, `openai:<id>` or `offline`. A provider prefix with an empty id,
    /// an unknown prefix, or a bare name other than `offline` is refused.
    pub fn parse(model: &str) -> Result<Self, ModelSpecError> {
        match model.split_once(':') {
            Some(("anthropic", id)) if !id.is_empty() => Ok(ModelSpec::Anthropic(id.to_owned())),
            Some(("openai", id)) if !id.is_empty() => Ok(ModelSpec::OpenAi(id.to_owned())),
            None if model == OFFLINE_MODEL => Ok(ModelSpec::Offline),
            _ => Err(ModelSpecError {
                model: model.to_owned(),
            }),
        }
    }

    /// The provider's own model id; `None` for the offline planner.
    pub fn provider_model(&self) -> Option<&str> {
        match self {
            ModelSpec::Anthropic(id) | ModelSpec::OpenAi(id) => Some(id),
            ModelSpec::Offline => None,
        }
    }
}

impl FromStr for ModelSpec {
    type Err = ModelSpecError;

    fn from_str(model: &str) -> Result<Self, Self::Err> {
        ModelSpec::parse(model)
    }
}

impl fmt::Display for ModelSpec {
    /// The name as it is configured: `parse(spec.to_string())` gives `spec` back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Anthropic(id) => write!(f, "anthropic:{id}"),
            ModelSpec::OpenAi(id) => write!(f, "openai:{id}"),
            ModelSpec::Offline => f.write_str(OFFLINE_MODEL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let anthropic = |id: &str| Some(ModelSpec::Anthropic(id.to_owned()));
        let openai = |id: &str| Some(ModelSpec::OpenAi(id.to_owned()));
        let cases = [
            (
                "anthropic:claude-sonnet-4-5",
                anthropic("claude-sonnet-4-5"),
            ),
            ("openai:gpt-4.1", openai("gpt-4.1")),
            ("openai:org/model:tag", openai("org/model:tag")),
            ("anthropic::x", anthropic(":x")),
            ("offline", Some(ModelSpec::Offline)),
            ("anthropic:", None),
            ("openai:", None),
            ("offline:x", None),
            ("Offline", None),
            ("ANTHROPIC:claude", None),
            (" offline", None),
            ("gpt-4", None),
            ("mistral:large", None),
            (":claude", None),
            ("", None),
        ];
        for (model, want) in cases {
            match want {
                Some(want) => assert_eq!(ModelSpec::parse(model), Ok(want), "{model:?}"),
                None => assert_eq!(
                    model.parse::<ModelSpec>(),
                    Err(ModelSpecError {
                        model: model.to_owned()
                    }),
                    "{model:?}"
                ),
            }
        }
    }

    #[test]
    fn the_error_says_what_is_accepted() {
        let error = ModelSpec::parse("gpt-4").unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown model 'gpt-4': use anthropic:<model>, openai:<model> or offline"
        );
    }

    #[test]
    fn display_round_trips() {
        for model in ["anthropic:claude-x", "openai:org/model:tag", "offline"] {
            let spec = ModelSpec::parse(model).unwrap();
            assert_eq!(spec.to_string(), model);
            assert_eq!(spec.provider_model().is_none(), model == "offline");
        }
    }
}
