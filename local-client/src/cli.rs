//! The command line, declared with clap (docs/ARCHITECTURE.md §3.6).
//!
//! `ultraplan` alone opens the interactive prompt, `ultraplan "<prompt>"` is a one-shot launch,
//! and the subcommands manage sessions. Configuration comes from flags, then the environment
//! (`ULTRAPLAN_SERVER`, `ULTRAPLAN_TOKEN`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Plan remotely: bundle this repository, let a plan-mode agent write the plan, review it in
/// the browser, then approve, reject with feedback, or teleport it back here.
#[derive(Debug, Parser)]
#[command(name = "ultraplan", version, subcommand_negates_reqs = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Option<Command>,

    /// With no subcommand: a one-shot launch (same as `ultraplan launch`).
    #[command(flatten)]
    pub launch: LaunchArgs,
}

/// Connection settings shared by every subcommand.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Server base URL.
    #[arg(long, global = true, env = "ULTRAPLAN_SERVER", value_name = "URL")]
    pub server: Option<String>,

    /// API token.
    #[arg(
        long,
        global = true,
        env = "ULTRAPLAN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// Arguments of a launch, as a subcommand or bare.
#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Launch without asking for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// Refine an existing plan file instead of starting from scratch.
    #[arg(long, value_name = "PLAN.md")]
    pub refine: Option<PathBuf>,

    /// Print the created session as JSON.
    #[arg(long)]
    pub json: bool,

    /// The repository to plan in (any directory inside it).
    #[arg(long, short = 'C', value_name = "PATH", default_value = ".")]
    pub repo: PathBuf,

    /// Do not start the background poller (follow the session with `ultraplan watch ID`).
    #[arg(long)]
    pub no_watch: bool,

    /// Use this named environment on the server (`ultraplan env list`) instead of the
    /// repository's .ultraplan/environment.toml.
    #[arg(long = "env", value_name = "NAME")]
    pub environment: Option<String>,

    /// What to plan. Words are joined with spaces.
    #[arg(value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

/// A session id argument.
#[derive(Debug, Args)]
pub struct SessionId {
    /// Session id.
    #[arg(value_name = "ID")]
    pub id: String,
}

/// Arguments of `pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    #[command(flatten)]
    pub session: SessionId,

    /// Show the per-file report of what would happen; change nothing (no stash, no worktree,
    /// no files).
    #[arg(long)]
    pub dry_run: bool,

    /// Apply on a new branch ultraplan/ID in a fresh git worktree (at the session's base
    /// commit when this repository has it, else HEAD).
    #[arg(long, conflicts_with = "stash")]
    pub worktree: bool,

    /// With local changes: stash them (untracked files included), apply, then pop them.
    #[arg(long)]
    pub stash: bool,

    /// Where to create the worktree; implies --worktree [default: <repo>.ultraplan-<first 8
    /// characters of ID>, next to the repository].
    #[arg(long, value_name = "PATH", conflicts_with = "stash")]
    pub worktree_dir: Option<PathBuf>,

    /// Fail at once while the plan is still being executed, instead of waiting for the patch.
    #[arg(long)]
    pub no_wait: bool,

    /// Apply the patch even when the verifier's verdict is FAIL (without it, a terminal asks
    /// and anything else refuses).
    #[arg(long, short = 'y')]
    pub yes: bool,

    /// The repository to apply the patch to (any directory inside it).
    #[arg(long, short = 'C', value_name = "PATH", default_value = ".")]
    pub repo: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a remote planning session for this repository.
    Launch(LaunchArgs),
    /// Show a session's status (the most recent one without ID).
    Status {
        #[arg(value_name = "ID")]
        id: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List your sessions.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Open a session's review page in the browser.
    Open(SessionId),
    /// Stop a session and archive it.
    Stop {
        #[command(flatten)]
        session: SessionId,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Approve the pending plan; the agent implements it remotely.
    Approve(SessionId),
    /// Reject the pending plan with feedback; the agent revises it.
    Reject {
        #[command(flatten)]
        session: SessionId,
        /// Feedback for the agent.
        #[arg(
            short = 'm',
            long = "message",
            value_name = "FEEDBACK",
            required = true
        )]
        message: String,
    },
    /// Bring the pending plan back to this terminal to implement it locally.
    Teleport(SessionId),
    /// Bring a session's result here: a teleported plan, or the patch of a plan executed
    /// remotely.
    ///
    /// A teleported plan is saved under .ultraplan/plans/, printed, and the session archived.
    ///
    /// An approved plan is executed remotely; its patch is downloaded (waiting for the
    /// execution to finish unless --no-wait) and applied to the repository around the current
    /// directory (at its top level), never committed. Each file is checked first: it applies,
    /// it is already applied (skipped), or it conflicts. With a clean tree and no conflicts the
    /// patch goes into the working tree. With uncommitted changes or conflicts nothing is
    /// touched unless you choose: a new branch ultraplan/ID in a fresh worktree at the
    /// session's base commit (--worktree), or stash your changes, apply, pop them (--stash). A
    /// terminal asks; without one, the choices are printed and nothing changes.
    ///
    /// A patch that would write into .git, through a symlink, or leave a symlink pointing
    /// out of the repository or into .git, or that git reads differently from the report, is
    /// refused whole: every refused file is listed with why, and nothing is touched. The
    /// download is capped at 64 MiB (ULTRAPLAN_MAX_PATCH_BYTES overrides it).
    #[command(
        after_help = "Exit status: 0 applied, or nothing to do; 1 conflicts, a refused \
                            patch, a dirty tree left untouched, cancelled, or another \
                            failure; 2 usage errors (bad arguments, not a git repository)."
    )]
    Pull(PullArgs),
    /// Save the server URL and token (taken from --server and --token).
    Login,
    /// Print the keyword triggers of TEXT and its rewrite, as one JSON line.
    Keyword {
        /// The text to inspect.
        #[arg(value_name = "TEXT", allow_hyphen_values = true)]
        text: String,
    },
    /// Follow a session in the foreground until its plan is decided (what the background
    /// poller runs).
    Watch {
        #[command(flatten)]
        session: SessionId,
        /// Print every state update as a JSON line.
        #[arg(long)]
        json: bool,
        /// Run as the background poller (no terminal; hangups ignored).
        #[arg(long, hide = true)]
        detached: bool,
    },
    /// Bundle a repository as teleport would, and print its manifest and SHA-256.
    Bundle {
        /// Where to write the .tar.gz or .tar.zst (default: the cache, named by its SHA-256).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Compression level: gzip 1 (fastest) to 6 [default: 1], zstd 1 to 19 [default: 3].
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=19))]
        level: Option<u32>,
        /// Compression: gzip (every server) or zstd (servers that advertise it).
        #[arg(long, value_name = "NAME", default_value = "gzip")]
        encoding: ultraplan::bundle::Codec,
        /// The repository (any directory inside it) or plain directory to bundle.
        #[arg(value_name = "PATH", default_value = ".")]
        path: PathBuf,
    },
    /// Print a session's timeline: messages, assistant text, tool calls, todo updates,
    /// subagents, plans, decisions and results.
    ///
    /// Everything the server sends is sanitised first. With --json, one JSON object per line:
    /// {"id", "created_at", "kind", "subagent", "tool", "text", "is_error"} (see the README).
    #[command(
        after_help = "Exit status: 0 printed (following: the session ended, or Ctrl-C); \
                            1 an error (unknown session, the server); 2 usage errors."
    )]
    Logs {
        #[command(flatten)]
        session: SessionId,
        /// Follow the session live; return when it ends (archived, or its agent stopped).
        #[arg(long, short = 'f')]
        follow: bool,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Send a message to a session's agent: answer its question or steer it.
    ///
    /// A waiting agent reads it at once; a busy one (working, or waiting for a plan
    /// decision) queues it. Says when the server stored it, with its event id.
    Message {
        #[command(flatten)]
        session: SessionId,
        /// The message.
        #[arg(value_name = "TEXT", allow_hyphen_values = true)]
        text: String,
        /// Print the delivery as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Wait until a session reaches a phase.
    ///
    /// plan: a plan is ready for review (or was already decided). decided: a plan was
    /// approved or teleported. done: a teleported plan, or an approved plan whose remote
    /// execution finished.
    #[command(
        after_help = "Exit status: 0 reached; 1 an error (unknown session, the server); 2 usage \
                      errors; 3 --timeout passed first; 4 the session ended before reaching it \
                      (archived, or its agent stopped); 130 interrupted (Ctrl-C)."
    )]
    Wait {
        #[command(flatten)]
        session: SessionId,
        /// The phase to wait for.
        #[arg(long, value_enum, default_value = "plan")]
        until: ultraplan::script::wait::Until,
        /// Give up after this many seconds (exit status 3).
        #[arg(long, value_name = "S")]
        timeout: Option<u64>,
        /// Print the final state as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Manage the secrets your environments' setup phase gets as environment variables.
    ///
    /// Values live on the server, sealed, per user; no command ever shows one again.
    Secret {
        #[command(subcommand)]
        action: SecretAction,
    },
    /// Manage your named environments on the server (use one with `launch --env NAME`).
    Env {
        #[command(subcommand)]
        action: EnvAction,
    },
    /// Integrations with other tools.
    Hook {
        #[command(subcommand)]
        target: HookTarget,
    },
}

#[derive(Debug, Subcommand)]
pub enum EnvAction {
    /// Create or replace an environment from a file in the format of
    /// .ultraplan/environment.toml ([setup], [agent], …).
    Set {
        /// Lower-case letters, digits, '.', '_' and '-', e.g. py312.
        #[arg(value_name = "NAME")]
        name: String,
        /// The TOML file.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
    },
    /// List your environments and the ones the server shares with every user.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete one of your environments.
    Rm {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum SecretAction {
    /// Create or replace a secret: the value is typed at a prompt that does not echo, or
    /// read from stdin when it is not a terminal (one trailing newline dropped).
    Set {
        /// Upper-case letters, digits and underscores, e.g. PIP_TOKEN.
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// List your secrets' names and when each was last set.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a secret.
    Rm {
        #[arg(value_name = "NAME")]
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum HookTarget {
    /// The Claude Code UserPromptSubmit hook.
    ClaudeCode,
}

impl Command {
    /// The subcommand as the user types it, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Launch(_) => "launch",
            Self::Status { .. } => "status",
            Self::List { .. } => "list",
            Self::Open(_) => "open",
            Self::Stop { .. } => "stop",
            Self::Approve(_) => "approve",
            Self::Reject { .. } => "reject",
            Self::Teleport(_) => "teleport",
            Self::Pull(_) => "pull",
            Self::Login => "login",
            Self::Keyword { .. } => "keyword",
            Self::Watch { .. } => "watch",
            Self::Bundle { .. } => "bundle",
            Self::Logs { .. } => "logs",
            Self::Message { .. } => "message",
            Self::Wait { .. } => "wait",
            Self::Secret { .. } => "secret",
            Self::Env { .. } => "env",
            Self::Hook { .. } => "hook claude-code",
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command};

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ultraplan").chain(args.iter().copied()))
    }

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bare_prompt_is_a_launch() {
        let cli = parse(&["--yes", "fix", "auth"]).unwrap();
        assert!(cli.command.is_none());
        assert!(cli.launch.yes);
        assert_eq!(cli.launch.prompt, ["fix", "auth"]);
    }

    #[test]
    fn global_flags_may_come_before_the_subcommand() {
        let cli = parse(&["--server", "http://x", "list", "--json"]).unwrap();
        assert!(matches!(cli.command, Some(Command::List { json: true })));
        assert_eq!(cli.global.server.as_deref(), Some("http://x"));
        let cli = parse(&["--server", "http://x", "fix", "the", "list"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.launch.prompt, ["fix", "the", "list"]);
    }

    #[test]
    fn subcommands_parse() {
        let cli = parse(&["reject", "s1", "-m", "too vague"]).unwrap();
        assert!(
            matches!(cli.command, Some(Command::Reject { ref message, .. }) if message == "too vague")
        );
        let cli = parse(&["keyword", "-ultraplan"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Keyword { ref text }) if text == "-ultraplan"));
        let cli = parse(&["login", "--server", "http://x", "--token", "t"]).unwrap();
        assert_eq!(cli.global.server.as_deref(), Some("http://x"));
        assert!(parse(&["reject", "s1"]).is_err());
        assert!(parse(&["hook", "claude-code"]).is_ok());
    }

    #[test]
    fn session_script_flags() {
        use ultraplan::script::wait::Until;
        let cli = parse(&["logs", "s1", "-f", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Logs {
                follow: true,
                json: true,
                ..
            })
        ));
        let cli = parse(&["message", "s1", "-steer left"]).unwrap();
        assert!(
            matches!(cli.command, Some(Command::Message { ref text, json: false, .. }) if text == "-steer left")
        );
        let cli = parse(&["wait", "s1"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Wait {
                until: Until::Plan,
                timeout: None,
                json: false,
                ..
            })
        ));
        let cli = parse(&["wait", "s1", "--until", "done", "--timeout", "5", "--json"]).unwrap();
        assert!(matches!(
            cli.command,
            Some(Command::Wait {
                until: Until::Done,
                timeout: Some(5),
                json: true,
                ..
            })
        ));
        assert!(parse(&["wait", "s1", "--until", "later"]).is_err());
        assert!(parse(&["wait", "s1", "--timeout", "-1"]).is_err());
        assert!(parse(&["message", "s1"]).is_err());
    }

    #[test]
    fn pull_flags() {
        let cli = parse(&["pull", "s1"]).unwrap();
        let Some(Command::Pull(args)) = cli.command else {
            panic!("not a pull");
        };
        assert_eq!(args.session.id, "s1");
        assert!(!args.dry_run && !args.worktree && !args.stash && !args.no_wait);
        assert_eq!(args.repo, std::path::Path::new("."));
        let cli = parse(&[
            "pull",
            "s1",
            "--dry-run",
            "--worktree-dir",
            "/x",
            "--no-wait",
        ])
        .unwrap();
        let Some(Command::Pull(args)) = cli.command else {
            panic!("not a pull");
        };
        assert!(args.dry_run && args.no_wait);
        assert_eq!(
            args.worktree_dir.as_deref(),
            Some(std::path::Path::new("/x"))
        );
        assert!(parse(&["pull", "s1", "--worktree", "--stash"]).is_err());
        assert!(parse(&["pull", "s1", "--worktree-dir", "/x", "--stash"]).is_err());
    }
}
