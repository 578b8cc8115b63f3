//! Named environments (docs/ARCHITECTURE.md §6.5): an environment file's TOML kept on the
//! server under a name, so a session can use it instead of the repository's
//! `.ultraplan/environment.toml` (`ultraplan launch --env NAME`). A user's own are theirs
//! alone; the operator may share one with every user (`ultraplan-server env add --shared`),
//! and then its snapshot is shared too, so a shared environment may not name secrets.

use std::sync::Arc;

use ultraplan_protocol::environments::{
    EnvironmentInfo, MAX_ENVIRONMENT_DEFINITION_BYTES, environment_name_problem,
};
use ultraplan_runner::egress::NetworkPolicy;
use ultraplan_runner::environment::{EnvironmentFile, file};

use crate::store::{EnvironmentRow, SHARED_OWNER, Store, StoreError, format_ms, now_ms};

/// Who an environment is set for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// One user's own.
    Owner(&'a str),
    /// Every user's (the operator's choice).
    Shared,
}

impl Scope<'_> {
    fn owner_id(&self) -> &str {
        match self {
            Scope::Owner(id) => id,
            Scope::Shared => SHARED_OWNER,
        }
    }
}

/// What can go wrong with a named environment.
#[derive(Debug, thiserror::Error)]
pub enum EnvironmentError {
    #[error("{0}")]
    InvalidName(&'static str),
    #[error("{0}")]
    InvalidDefinition(String),
    #[error("no environment named {0}")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EnvironmentError {
    /// The stable code the API answers with.
    pub fn code(&self) -> &'static str {
        match self {
            EnvironmentError::InvalidName(_) => "invalid_environment_name",
            EnvironmentError::InvalidDefinition(_) => "invalid_environment",
            EnvironmentError::NotFound(_) => "unknown_environment",
            EnvironmentError::Store(_) => "internal",
        }
    }
}

/// The named-environment use cases over a store. Cheap to clone.
#[derive(Clone)]
pub struct Environments {
    store: Arc<dyn Store>,
}

impl Environments {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Environments { store }
    }

    /// Create or replace an environment, after checking its name and definition exactly as
    /// a session would read them.
    pub async fn set(
        &self,
        scope: Scope<'_>,
        name: &str,
        definition: &str,
    ) -> Result<(), EnvironmentError> {
        check_name(name)?;
        check_definition(definition, scope == Scope::Shared)?;
        let now = now_ms();
        let row = EnvironmentRow {
            owner_id: scope.owner_id().to_owned(),
            name: name.to_owned(),
            definition: definition.to_owned(),
            created_at: now,
            updated_at: now,
        };
        self.store.put_environment(&row).await?;
        tracing::info!(name, shared = row.shared(), "environment set");
        Ok(())
    }

    /// The environments `owner` may use: their own, then the shared ones, by name.
    pub async fn list(&self, owner: &str) -> Result<Vec<EnvironmentInfo>, EnvironmentError> {
        let rows = self.store.environments_for(owner).await?;
        Ok(rows.iter().map(info).collect())
    }

    /// Only the shared environments.
    pub async fn list_shared(&self) -> Result<Vec<EnvironmentInfo>, EnvironmentError> {
        self.list(SHARED_OWNER).await
    }

    /// The environment `name` as `owner` sees it (their own, else a shared one).
    pub async fn resolve(
        &self,
        owner: &str,
        name: &str,
    ) -> Result<EnvironmentRow, EnvironmentError> {
        check_name(name)?;
        self.store
            .environment_for(owner, name)
            .await?
            .ok_or_else(|| EnvironmentError::NotFound(name.to_owned()))
    }

    pub async fn delete(&self, scope: Scope<'_>, name: &str) -> Result<(), EnvironmentError> {
        check_name(name)?;
        if !self
            .store
            .delete_environment(scope.owner_id(), name)
            .await?
        {
            return Err(EnvironmentError::NotFound(name.to_owned()));
        }
        Ok(())
    }
}

fn check_name(name: &str) -> Result<(), EnvironmentError> {
    match environment_name_problem(name) {
        Some(problem) => Err(EnvironmentError::InvalidName(problem)),
        None => Ok(()),
    }
}

/// Parse a definition the way a session reads it; a shared one may not name secrets (its
/// snapshot serves every user, and secrets are each user's own).
pub fn check_definition(
    definition: &str,
    shared: bool,
) -> Result<EnvironmentFile, EnvironmentError> {
    if definition.len() > MAX_ENVIRONMENT_DEFINITION_BYTES {
        return Err(EnvironmentError::InvalidDefinition(format!(
            "the definition is larger than {MAX_ENVIRONMENT_DEFINITION_BYTES} bytes"
        )));
    }
    let parsed = file::parse(definition).map_err(|e| EnvironmentError::InvalidDefinition(e.0))?;
    for (what, entries) in [
        ("[setup] network", &parsed.setup_network),
        ("[agent] network", &parsed.agent_network),
    ] {
        if let Err(error) = NetworkPolicy::parse(entries) {
            return Err(EnvironmentError::InvalidDefinition(format!(
                "{what}: {error}"
            )));
        }
    }
    if !parsed.verify.is_empty() {
        return Err(EnvironmentError::InvalidDefinition(
            "[verify] belongs in the repository's .ultraplan/environment.toml: a named \
             environment says how to build the machine, and the verifier reads the project's \
             test commands from the repository"
                .to_owned(),
        ));
    }
    if shared && !parsed.secrets.is_empty() {
        return Err(EnvironmentError::InvalidDefinition(
            "a shared environment cannot name secrets: its snapshot serves every user, and \
             secrets are each user's own"
                .to_owned(),
        ));
    }
    Ok(parsed)
}

/// The API's view of a stored environment.
pub fn info(row: &EnvironmentRow) -> EnvironmentInfo {
    EnvironmentInfo {
        name: row.name.clone(),
        shared: row.shared(),
        definition: row.definition.clone(),
        updated_at: format_ms(row.updated_at),
    }
}

#[cfg(test)]
mod tests;
