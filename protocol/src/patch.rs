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
    /// The verifier's verdict on the execution, when it ran (an execution that changed
    /// nothing is not verified).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Boxed: every event is as large as this summary.
    pub verdict: Option<Box<crate::verdict::Verdict>>,
}

/// A path the patch does not carry: a new file too large for it, or a symlink the server
/// refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeftOut {
    pub path: String,
    /// Size of a file left out for its size; the length of a refused symlink's target.
    pub bytes: u64,
    /// Why it was left out (`too_large` when absent: summaries stored before this field).
    #[serde(default)]
    pub reason: LeftOutReason,
    /// A refused symlink's target, as the agent wrote it (lossy UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl LeftOut {
    /// A new file over the size limit for patches.
    pub fn too_large(path: String, bytes: u64) -> Self {
        LeftOut {
            path,
            bytes,
            reason: LeftOutReason::TooLarge,
            target: None,
        }
    }
}

/// Why a path is not in the patch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LeftOutReason {
    /// A new file larger than the server carries in a patch.
    #[default]
    TooLarge,
    /// A symlink with an absolute target.
    SymlinkAbsolute,
    /// A symlink whose target leaves the repository (lexically or through other symlinks).
    SymlinkEscapes,
    /// A symlink that points into `.git` (in any spelling) or lives under such a path.
    SymlinkIntoGit,
    /// A symlink whose target loops through other symlinks.
    SymlinkLoops,
}

impl LeftOutReason {
    /// Whether this is a refused symlink.
    pub fn is_symlink(self) -> bool {
        !matches!(self, LeftOutReason::TooLarge)
    }

    /// Plain words for the reason.
    pub fn describe(self) -> &'static str {
        match self {
            LeftOutReason::TooLarge => "too large for a patch",
            LeftOutReason::SymlinkAbsolute => "its target is an absolute path",
            LeftOutReason::SymlinkEscapes => "its target leaves the repository",
            LeftOutReason::SymlinkIntoGit => "it points into .git",
            LeftOutReason::SymlinkLoops => "its target loops through other symlinks",
        }
    }
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
    fn left_out_without_a_reason_is_too_large() {
        let old: LeftOut =
            serde_json::from_str(r#"{"path":"dump.sql","bytes":5}"#).expect("old summary");
        assert_eq!(old, LeftOut::too_large("dump.sql".into(), 5));
        let link = LeftOut {
            path: "leak".into(),
            bytes: 11,
            reason: LeftOutReason::SymlinkAbsolute,
            target: Some("/etc/shadow".into()),
        };
        let json = serde_json::to_value(&link).expect("json");
        assert_eq!(json["reason"], "symlink_absolute");
        assert_eq!(json["target"], "/etc/shadow");
        assert_eq!(serde_json::from_value::<LeftOut>(json).expect("back"), link);
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
