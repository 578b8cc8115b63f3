//! `ultraplan-server`: serve the API, run migrations, manage users and flags.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use std::sync::Arc;
use ultraplan_server::config::{
    BodyDeadline, Config, RateLimit, RateLimits, RequestLimits, SandboxKind, Secret, UploadSlots,
    default_data_dir, defaults, sqlite_url,
};
use ultraplan_server::flags::Flag;
use ultraplan_server::store::{FlagRow, Store, now_ms, redact_url};

use ultraplan_server::auth;
use ultraplan_server::blobs::BlobLocation;
use ultraplan_server::model_router::Models;
use ultraplan_server::secrets::key_file::load_or_create;

mod env_cmd;
mod secret_cmd;

#[derive(Parser)]
#[command(
    name = "ultraplan-server",
    version,
    about = "The ultraplan remote planning server"
)]
struct Cli {
    /// Where the SQLite database, bundles and session workspaces live.
    #[arg(long, env = "ULTRAPLAN_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// Database URL (default: SQLite in the data dir). postgres:// for PostgreSQL.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
    /// The 32-byte key sealing users' secrets, mode 0600; made where absent (default:
    /// secrets.key in the data dir). Replicas sharing a database must share the file.
    #[arg(
        long,
        env = "ULTRAPLAN_SECRETS_KEY_FILE",
        global = true,
        value_name = "PATH"
    )]
    secrets_key_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server.
    Serve(Box<ServeArgs>),
    /// Apply database migrations and exit.
    Migrate,
    /// Manage users.
    #[command(subcommand)]
    User(UserCommand),
    /// Inspect and set feature flags.
    #[command(subcommand)]
    Flags(FlagsCommand),
    /// Manage the tokens runners of the fleet connect with (they can only claim and serve
    /// sessions and download their bundles).
    #[command(subcommand)]
    RunnerToken(RunnerTokenCommand),
    /// Manage a user's secrets for environment setup (values are never printed).
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Manage named environments: a user's own, or shared with every user.
    #[command(subcommand)]
    Env(EnvCommand),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "ULTRAPLAN_BIND", default_value_t = defaults::BIND)]
    bind: SocketAddr,
    /// Size cap of an execution workspace in bytes: a tmpfs of this size when the server runs
    /// as root (writes past it fail with ENOSPC; the patch holds what fit).
    #[arg(long, env = "ULTRAPLAN_WORKSPACE_MAX_BYTES", default_value_t = defaults::WORKSPACE_MAX_BYTES)]
    workspace_max_bytes: u64,
    /// Largest compressed bundle an upload may send, in bytes (a client over it is told which
    /// files to leave out with `.ultraplanignore`).
    #[arg(long, env = "ULTRAPLAN_MAX_BUNDLE_BYTES", default_value_t = defaults::MAX_BUNDLE_BYTES)]
    max_bundle_bytes: u64,
    /// Base URL used in links (default: http://<bind>).
    #[arg(long, env = "ULTRAPLAN_PUBLIC_URL")]
    public_url: Option<String>,
    /// Sandbox for agents.
    #[arg(long, env = "ULTRAPLAN_RUNNER", value_enum, default_value_t = defaults::RUNNER)]
    runner: SandboxKind,
    /// anthropic:<model>, openai:<model> or offline (default: anthropic if its key is set,
    /// else openai if its key is set, else offline).
    #[arg(long, env = "ULTRAPLAN_MODEL")]
    model: Option<String>,
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true)]
    anthropic_api_key: Option<String>,
    #[arg(long, env = "ANTHROPIC_BASE_URL")]
    anthropic_base_url: Option<String>,
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    openai_api_key: Option<String>,
    #[arg(long, env = "OPENAI_BASE_URL")]
    openai_base_url: Option<String>,
    /// Seconds of silence inside a streamed model answer before the attempt is retried.
    #[arg(long, env = "ULTRAPLAN_MODEL_IDLE_TIMEOUT_SECS", default_value_t = defaults::MODEL_IDLE_TIMEOUT_SECS)]
    model_idle_timeout_secs: u64,
    /// The static agent binary (default: `ultraplan-agent` beside this executable).
    #[arg(long, env = "ULTRAPLAN_AGENT_BIN")]
    agent_bin: Option<PathBuf>,
    /// Sessions with a live agent at once; more wait in order.
    #[arg(long, env = "ULTRAPLAN_MAX_RUNNING", default_value_t = defaults::MAX_RUNNING)]
    max_running: usize,
    /// The name this server's runner claims sessions under; unique among the processes on
    /// one database (default: the host name and a hash of the data dir).
    #[arg(long, env = "ULTRAPLAN_RUNNER_NAME")]
    runner_name: Option<String>,
    /// Seconds a runner's claim on a session lasts without a renewal; a session whose runner
    /// stops answering is resumed elsewhere this long after.
    #[arg(long, env = "ULTRAPLAN_LEASE_SECONDS", default_value_t = defaults::LEASE_SECONDS)]
    lease_seconds: u64,
    /// Run no agents here: sessions wait for keyless runners (`ultraplan-runner`) linked to
    /// this process, and for the runners of other server processes on the same PostgreSQL
    /// database (also `ULTRAPLAN_LOCAL_RUNNER=off`).
    #[arg(long)]
    no_local_runner: bool,
    /// `on` (default) or `off`: whether this process runs agents.
    #[arg(long, env = "ULTRAPLAN_LOCAL_RUNNER", default_value = "on", value_parser = ["on", "off"])]
    local_runner: String,
    /// Seconds an agent waiting on a decision, an answer or a message keeps its sandbox before
    /// it is parked (stopped; the answer resumes it from the log on any runner).
    #[arg(long, env = "ULTRAPLAN_PARK_AFTER_SECONDS", default_value_t = defaults::PARK_AFTER_SECONDS)]
    park_after_seconds: u64,
    /// Hours a cached environment (what a repository's `.ultraplan/environment.toml` setup
    /// built) is reused by later sessions of the same owner before it is built again.
    #[arg(long, env = "ULTRAPLAN_ENVIRONMENT_TTL_HOURS", default_value_t = defaults::ENVIRONMENT_TTL_HOURS)]
    environment_ttl_hours: u64,
    /// Longest an environment's setup may run, in seconds; an environment file's own
    /// `timeout_seconds` may only lower it.
    #[arg(long, env = "ULTRAPLAN_SETUP_TIMEOUT_SECONDS", default_value_t = defaults::SETUP_TIMEOUT_SECONDS)]
    setup_timeout_seconds: u64,
    /// Tokens (input, output and cache) one session may spend before it is stopped.
    #[arg(
        long,
        env = "ULTRAPLAN_SESSION_TOKEN_BUDGET",
        default_value_t = defaults::SESSION_TOKEN_BUDGET
    )]
    session_token_budget: u64,
    /// Writes (POST, PUT, PATCH, DELETE) per second each token may make, with bursts of ten
    /// seconds' worth (0: no limit).
    #[arg(long, env = "ULTRAPLAN_RATE_LIMIT", default_value_t = defaults::RATE_LIMIT)]
    rate_limit: u32,
    /// Reads (GET, HEAD) per second each token may make, with bursts of ten seconds' worth
    /// (0: no limit).
    #[arg(long, env = "ULTRAPLAN_READ_RATE_LIMIT", default_value_t = defaults::READ_RATE_LIMIT)]
    read_rate_limit: u32,
    /// Requests per second from one client address that do not authenticate (unknown
    /// tokens, login forms and links), with bursts of ten seconds' worth (0: no limit).
    #[arg(long, env = "ULTRAPLAN_ANON_RATE_LIMIT", default_value_t = defaults::ANON_RATE_LIMIT)]
    anon_rate_limit: u32,
    #[command(flatten)]
    request_limits: RequestLimitArgs,
    #[command(flatten)]
    retention: RetentionArgs,
    /// Where bundle archives are kept: file:///absolute/dir, or s3://bucket/prefix with the
    /// endpoint, region and keys from the standard AWS_* variables (AWS_ENDPOINT_URL,
    /// AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ALLOW_HTTP). Default: the
    /// data dir's blobs/ folder.
    #[arg(long, env = "ULTRAPLAN_BLOB_STORE", value_name = "URL")]
    blob_store: Option<BlobLocation>,
}

/// Retention of bundles and logins, and the per-user bundle quota.
#[derive(clap::Args)]
struct RetentionArgs {
    /// Most bundle storage (archives plus unpacked trees) one user may hold, in bytes or with
    /// a unit (10GiB, 512M); 0: no limit.
    #[arg(long, env = "ULTRAPLAN_BUNDLE_QUOTA", default_value = defaults::BUNDLE_QUOTA,
        value_parser = ultraplan_server::retention::parse_size)]
    bundle_quota: u64,
    /// Seconds a bundle that no session uses is kept after its upload.
    #[arg(long, env = "ULTRAPLAN_BUNDLE_GRACE_SECS", default_value_t = defaults::BUNDLE_GRACE_SECS)]
    bundle_grace_secs: u64,
    /// Seconds between retention passes (0: never delete anything).
    #[arg(long, env = "ULTRAPLAN_RETENTION_INTERVAL_SECS", default_value_t = defaults::RETENTION_INTERVAL_SECS)]
    retention_interval_secs: u64,
}

impl RetentionArgs {
    fn config(&self) -> ultraplan_server::config::RetentionConfig {
        use std::time::Duration;
        ultraplan_server::config::RetentionConfig {
            bundle_grace: Duration::from_secs(self.bundle_grace_secs),
            interval: Duration::from_secs(self.retention_interval_secs),
            bundle_quota_bytes: self.bundle_quota,
        }
    }
}

/// Deadlines and bounds on requests as they arrive.
#[derive(clap::Args)]
struct RequestLimitArgs {
    /// Seconds a connection has to send a request's headers (and idle keep-alive time).
    #[arg(long, env = "ULTRAPLAN_HEADER_TIMEOUT_SECS", default_value_t = defaults::HEADER_TIMEOUT_SECS)]
    header_timeout_secs: u64,
    /// Seconds a request body (a bundle upload included) may take in all.
    #[arg(long, env = "ULTRAPLAN_BODY_TIMEOUT_SECS", default_value_t = defaults::BODY_TIMEOUT_SECS)]
    body_timeout_secs: u64,
    /// Slowest average rate a request body may arrive at, in bytes per second, checked
    /// after the grace period (0: no minimum).
    #[arg(long, env = "ULTRAPLAN_BODY_MIN_RATE", default_value_t = defaults::BODY_MIN_RATE)]
    body_min_rate: u64,
    /// Seconds before the minimum rate applies.
    #[arg(long, env = "ULTRAPLAN_BODY_GRACE_SECS", default_value_t = defaults::BODY_GRACE_SECS)]
    body_grace_secs: u64,
    /// Bundle uploads one user may have in progress at once (more get 429).
    #[arg(long, env = "ULTRAPLAN_UPLOADS_PER_USER", default_value_t = defaults::UPLOADS_PER_USER)]
    uploads_per_user: usize,
    /// Bundle uploads the server receives at once (more wait briefly, then get 503).
    #[arg(long, env = "ULTRAPLAN_MAX_UPLOADS", default_value_t = defaults::MAX_UPLOADS)]
    max_uploads: usize,
}

impl RequestLimitArgs {
    fn limits(&self) -> RequestLimits {
        use std::time::Duration;
        RequestLimits {
            header_timeout: Duration::from_secs(self.header_timeout_secs.max(1)),
            body: BodyDeadline {
                total: Duration::from_secs(self.body_timeout_secs.max(1)),
                min_bytes_per_second: self.body_min_rate,
                grace: Duration::from_secs(self.body_grace_secs),
            },
            uploads: UploadSlots {
                per_user: self.uploads_per_user.max(1),
                global: self.max_uploads.max(1),
                ..UploadSlots::default()
            },
        }
    }
}

/// Threads the runtime may start for blocking work (file IO, bundle validation). Uploads hold
/// at most `--max-uploads` of them; the rest is headroom for everything else.
const MAX_BLOCKING_THREADS: usize = 128;

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user and print its API token (shown once).
    Add { name: String },
    /// Issue another API token for an existing user.
    Token { name: String },
}

#[derive(Subcommand)]
enum RunnerTokenCommand {
    /// Mint a token for a new runner and print it (shown once).
    Add { name: String },
    /// Show every runner's name and when its token was minted.
    List,
    /// Revoke a runner's token: it can no longer connect or download bundles.
    Revoke { name: String },
}

/// Whose environment: one user's (`--user NAME`) or every user's (`--shared`).
#[derive(clap::Args)]
#[group(required = true, multiple = false)]
struct EnvOwner {
    /// The user it belongs to.
    #[arg(long)]
    user: Option<String>,
    /// Shared with every user (its snapshot too, so it may not name secrets).
    #[arg(long)]
    shared: bool,
}

#[derive(Subcommand)]
enum EnvCommand {
    /// Create or replace an environment from a file holding an environment file's TOML.
    Add {
        name: String,
        /// The TOML (`[setup]`, `[agent]`, …), as in `.ultraplan/environment.toml`.
        #[arg(long)]
        file: PathBuf,
        #[command(flatten)]
        owner: EnvOwner,
    },
    /// Show the environments a user can use (theirs and the shared ones), or only the shared.
    List {
        #[command(flatten)]
        owner: EnvOwner,
    },
    /// Delete an environment.
    Rm {
        name: String,
        #[command(flatten)]
        owner: EnvOwner,
    },
}

#[derive(Subcommand)]
enum SecretCommand {
    /// Create or replace a secret, its value read from stdin (one trailing newline dropped).
    Set {
        #[arg(long)]
        user: String,
        name: String,
    },
    /// Show a user's secrets and when each was last set.
    List {
        #[arg(long)]
        user: String,
    },
    /// Delete a secret.
    Rm {
        #[arg(long)]
        user: String,
        name: String,
    },
    /// Re-seal every user's secrets under a new key file (made, mode 0600, when absent); then
    /// point every replica's --secrets-key-file at it and restart them. Run it again after the
    /// restart to pick up values set under the old key meanwhile.
    RotateKey {
        /// The new key file.
        #[arg(long)]
        new_key_file: PathBuf,
    },
}

#[derive(Subcommand)]
enum FlagsCommand {
    /// Show every flag's stored values.
    List,
    /// Set a flag globally, for one user, or for a percentage of users.
    Set {
        name: String,
        value: String,
        /// Override for this user only.
        #[arg(long)]
        user: Option<String>,
        /// Apply the global value to this percentage of users (stable per user).
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
        rollout: Option<u8>,
    },
}

fn base_config(cli: &Cli) -> Config {
    let data_dir = cli.data_dir.clone().unwrap_or_else(default_data_dir);
    let mut config = Config::for_data_dir(&data_dir);
    let url = cli
        .database_url
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| sqlite_url(&data_dir));
    config.database_url = Secret::new(url);
    if let Some(path) = cli
        .secrets_key_file
        .clone()
        .filter(|p| !p.as_os_str().is_empty())
    {
        config.secrets_key_file = path;
    }
    config
}

fn apply_serve_args(config: &mut Config, args: ServeArgs) {
    config.bind = args.bind;
    config.public_url = args
        .public_url
        .unwrap_or_else(|| format!("http://{}", args.bind));
    config.runner = args.runner;
    config.max_running_sessions = args.max_running.max(1);
    config.runner_name = args.runner_name.filter(|n| !n.trim().is_empty());
    config.lease_seconds = args.lease_seconds.max(1);
    config.local_runner = !args.no_local_runner && args.local_runner == "on";
    config.park_after_seconds = args.park_after_seconds;
    config.environment_ttl_hours = args.environment_ttl_hours.max(1);
    config.setup_timeout_seconds = args.setup_timeout_seconds.max(1);
    config.session_token_budget = args.session_token_budget;
    config.workspace_max_bytes = args.workspace_max_bytes;
    config.bundle_limits.max_archive_bytes = args.max_bundle_bytes;
    config.rate_limits = RateLimits {
        writes: RateLimit::per_second(args.rate_limit),
        reads: RateLimit::per_second(args.read_rate_limit),
        anonymous: RateLimit::per_second(args.anon_rate_limit),
    };
    config.request_limits = args.request_limits.limits();
    config.retention = args.retention.config();
    config.blob_store = args.blob_store;
    if let Some(agent) = args.agent_bin {
        config.agent_binary = agent;
    }
    let non_empty = |v: Option<String>| v.filter(|s| !s.is_empty());
    config.anthropic_api_key = non_empty(args.anthropic_api_key).map(Secret::new);
    config.anthropic_base_url = non_empty(args.anthropic_base_url);
    config.openai_api_key = non_empty(args.openai_api_key).map(Secret::new);
    config.openai_base_url = non_empty(args.openai_base_url);
    config.model_idle_timeout = std::time::Duration::from_secs(args.model_idle_timeout_secs.max(1));
    config.model = non_empty(args.model).unwrap_or_else(|| {
        Config::default_model(
            config.anthropic_api_key.is_some(),
            config.openai_api_key.is_some(),
        )
    });
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for SIGTERM");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .build()
        .context("starting the async runtime")?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ULTRAPLAN_LOG")
                .unwrap_or_else(|_| "info,sqlx=warn,tower_http=info".into()),
        )
        .with_writer(std::io::stderr)
        // Colours for a terminal only: a log file or collector gets plain `key=value` fields.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let mut config = base_config(&cli);
    match cli.command {
        Command::Serve(args) => {
            apply_serve_args(&mut config, *args);
            serve(config).await
        }
        Command::Migrate => {
            open_store(&config).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::User(command) => user(&config, command).await,
        Command::Flags(command) => flags(&config, command).await,
        Command::RunnerToken(command) => runner_token(&config, command).await,
        Command::Secret(command) => secret_cmd::run(&config, command).await,
        Command::Env(command) => env_cmd::run(&config, command).await,
    }
}

async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    ultraplan_server::open(config)
        .await
        .with_context(|| format!("opening {}", redact_url(config.database_url.expose())))
}

async fn user(config: &Config, command: UserCommand) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    match command {
        UserCommand::Add { name } => {
            let token = auth::create_user_with_token(store.as_ref(), &name)
                .await
                .with_context(|| format!("creating user {name}"))?;
            print_token(&name, &token);
        }
        UserCommand::Token { name } => {
            let Some(user) = store.user_by_name(&name).await? else {
                bail!("no user named {name}");
            };
            let token = auth::issue_token(store.as_ref(), &user.id).await?;
            print_token(&name, &token);
        }
    }
    Ok(())
}

#[allow(clippy::print_stdout)]
async fn runner_token(config: &Config, command: RunnerTokenCommand) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    match command {
        RunnerTokenCommand::Add { name } => {
            let token = auth::create_runner_token(store.as_ref(), &name)
                .await
                .with_context(|| format!("creating runner {name}"))?;
            eprintln!("Created a runner token for {name}. It is shown once; store it now.");
            println!("{token}");
        }
        RunnerTokenCommand::List => {
            println!("{:<24} CREATED", "RUNNER");
            for (name, created_at) in store.runner_tokens().await? {
                println!(
                    "{name:<24} {}",
                    ultraplan_server::store::format_ms(created_at)
                );
            }
        }
        RunnerTokenCommand::Revoke { name } => {
            if !store.revoke_runner_token(&name).await? {
                bail!("no runner named {name}");
            }
            eprintln!("Revoked the token of runner {name}.");
        }
    }
    Ok(())
}

async fn flags(config: &Config, command: FlagsCommand) -> anyhow::Result<()> {
    let store = open_store(config).await?;
    match command {
        FlagsCommand::List => list_flags(store.as_ref()).await,
        FlagsCommand::Set {
            name,
            value,
            user,
            rollout,
        } => set_flag(store.as_ref(), &name, &value, user.as_deref(), rollout).await,
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("binding {}", config.bind))?;
    let addr = listener.local_addr()?;
    let blobs = config.blobs().context("opening the blob store")?;
    tracing::info!(kind = blobs.location().kind(), location = %blobs.location(), "blob store");
    // A key file that is there but unusable stops the server here, before it serves anyone.
    load_or_create(&config.secrets_key_file).context("checking the secrets key")?;
    let models = Arc::new(Models::from_config(&config));
    let database = redact_url(config.database_url.expose());
    let state = ultraplan_server::start(config, models)
        .await
        .with_context(|| format!("opening {database}"))?;
    tracing::info!(
        %addr,
        model = %state.core.config.model,
        runner = state.agents.orchestrator().map_or("none", |o| o.runner_name()),
        data_dir = %state.core.config.data_dir.display(),
        blob_store = %state.core.config.blob_location(),
        "ultraplan-server listening"
    );
    // On SIGTERM the runner hands its sessions back before the listener closes, so another
    // replica resumes them at once rather than after their leases lapse.
    let agents = state.agents.clone();
    let fleet = state.fleet.clone();
    let shutdown = async move {
        shutdown_signal().await;
        let local = async {
            if let Some(orchestrator) = agents.orchestrator() {
                orchestrator.drain().await;
            }
        };
        let linked = async {
            if let Some(fleet) = &fleet {
                fleet.drain().await;
            }
        };
        tokio::join!(local, linked);
    };
    ultraplan_server::serve(listener, state, shutdown).await?;
    Ok(())
}

#[allow(clippy::print_stdout)]
fn print_token(name: &str, token: &str) {
    eprintln!("Created an API token for {name}. It is shown once; store it now.");
    println!("{token}");
}

#[allow(clippy::print_stdout)]
async fn list_flags(store: &dyn ultraplan_server::store::Store) -> anyhow::Result<()> {
    let rows = store.list_flags().await?;
    println!("{:<18} {:<12} {:<8} VALUE", "FLAG", "USER", "ROLLOUT");
    for flag in Flag::ALL {
        let of_flag: Vec<_> = rows.iter().filter(|r| r.name == flag.name()).collect();
        if of_flag.is_empty() {
            println!("{:<18} {:<12} {:<8} (default)", flag.name(), "*", "-");
        }
        for row in of_flag {
            let user = row.user_id.as_deref().unwrap_or("*");
            let pct = row.rollout_pct.map_or("-".to_owned(), |p| format!("{p}%"));
            println!("{:<18} {:<12} {:<8} {}", flag.name(), user, pct, row.value);
        }
    }
    Ok(())
}

async fn set_flag(
    store: &dyn ultraplan_server::store::Store,
    name: &str,
    value: &str,
    user: Option<&str>,
    rollout: Option<u8>,
) -> anyhow::Result<()> {
    let Some(flag) = Flag::parse(name) else {
        let names: Vec<_> = Flag::ALL.iter().map(|f| f.name()).collect();
        bail!("unknown flag {name}; flags: {}", names.join(", "));
    };
    flag.validate(value).map_err(anyhow::Error::msg)?;
    if user.is_some() && rollout.is_some() {
        bail!("--rollout applies to the global value; it cannot be combined with --user");
    }
    let user_id = match user {
        Some(name) => Some(
            store
                .user_by_name(name)
                .await?
                .with_context(|| format!("no user named {name}"))?
                .id,
        ),
        None => None,
    };
    store
        .set_flag(&FlagRow {
            name: flag.name().to_owned(),
            user_id,
            value: value.to_owned(),
            rollout_pct: rollout,
            updated_at: now_ms(),
        })
        .await?;
    eprintln!(
        "{} = {value} ({})",
        flag.name(),
        user.map_or("global".to_owned(), |u| format!("user {u}"))
    );
    Ok(())
}
