//! The change remote execution produced: per-file stats, the session's execution state, and
//! the body of `GET /v1/sessions/{id}/patch`.

use serde::{Deserialize, Serialize};

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FileChange {
    Added,
    Modified,
    Deleted,
    /// The mode (e.g. the executable bit) or symlink target changed.
    TypeChanged,
}

impl FileChange {
    /// The one-letter code `git diff --name-status` uses.
    pub fn letter(self) -> char {
        match self {
            FileChange::Added => 'A',
            FileChange::Modified => 'M',
            FileChange::Deleted => 'D',
            FileChange::TypeChanged => 'T',
        }
    }
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PatchFile {
    /// Repository-relative path, `/`-separated.
    pub path: String,
    pub change: FileChange,
    /// Lines added (0 for binary files).
    pub additions: u64,
    /// Lines removed (0 for binary files).
    pub deletions: u64,
    #[serde(default)]
    pub binary: bool,
}

/// What a patch holds, without its text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PatchSummary {
    pub files: Vec<PatchFile>,
    pub additions: u64,
    pub deletions: u64,
    /// Size of the unified diff in bytes.
    pub bytes: u64,
    /// The commit the bundle was taken from, when the client knew it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// New files too large to carry in a patch (build outputs, dumps); they are not in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<LeftOut>,
}

/// A new file the patch does not carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeftOut {
    pub path: String,
    pub bytes: u64,
}

impl PatchSummary {
    /// Whether execution changed nothing.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// `3 files changed, +12 −2` (or `no changes`).
    pub fn headline(&self) -> String {
        match self.files.len() {
            0 => "no changes".to_owned(),
            1 => format!("1 file changed, +{} −{}", self.additions, self.deletions),
            n => format!("{n} files changed, +{} −{}", self.additions, self.deletions),
        }
    }
}

/// Where remote execution of an approved plan stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ExecutionState {
    /// The agent is implementing the plan; no patch yet.
    Executing,
    /// The patch is stored (possibly empty).
    Finished,
}

/// `execution` in the session resource: present once a plan was approved for remote
/// execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Execution {
    pub state: ExecutionState,
    /// The patch's summary once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<PatchSummary>,
}

/// `GET /v1/sessions/{id}/patch` with `Accept: application/json`. The default answer is the
/// raw diff (`text/x-diff`), byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PatchResource {
    pub session_id: String,
    #[serde(flatten)]
    pub summary: PatchSummary,
    /// The unified diff (`git apply` input); lossy UTF-8 here, exact in the raw answer.
    pub diff: String,
    pub created_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headlines() {
        let file = |path: &str| PatchFile {
            path: path.into(),
            change: FileChange::Modified,
            additions: 1,
            deletions: 0,
            binary: false,
        };
        let cases = [
            (vec![], "no changes"),
            (vec![file("a")], "1 file changed, +3 −1"),
            (vec![file("a"), file("b")], "2 files changed, +3 −1"),
        ];
        for (files, want) in cases {
            let summary = PatchSummary {
                files,
                additions: 3,
                deletions: 1,
                ..PatchSummary::default()
            };
            assert_eq!(summary.headline(), want);
        }
    }

    #[test]
    fn wire_names() {
        let json = serde_json::to_value(Execution {
            state: ExecutionState::Executing,
            patch: None,
        })
        .expect("json");
        assert_eq!(json, serde_json::json!({"state": "executing"}));
        assert_eq!(
            serde_json::to_value(FileChange::TypeChanged).expect("json"),
            "type_changed"
        );
    }
}
