//! `ultraplan "<prompt>"` / `ultraplan launch`: eligibility, confirmation, bundle, deduplicated
//! upload, session creation, then the detached poller; the terminal is free again at once.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use ultraplan::api::Client;
use ultraplan::bundle::{self, Bundle, Codec, Options};
use ultraplan::config::Settings;
use ultraplan::keyword;
use ultraplan::launch::{self, DEFAULT_REFINE_PROMPT, Upload};
use ultraplan::state::SessionState;
use ultraplan_protocol::api::Eligibility;
use ultraplan_protocol::session::SessionResource;

use super::{Env, ui, watch};
use crate::cli::LaunchArgs;

/// Exit code of a usage error.
const USAGE: u8 = 2;

/// A launch, once the person agreed to it.
pub struct Request {
    /// The prompt to send (keyword already rewritten).
    pub prompt: String,
    pub draft_plan: Option<String>,
    /// A named environment on the server to use instead of the repository's file.
    pub environment: Option<String>,
    /// Any directory inside the repository.
    pub repo: PathBuf,
    /// Start the detached poller.
    pub watch: bool,
    /// No progress or notes on stderr.
    pub quiet: bool,
    /// The bundle's compression, as negotiated with the server ([`Codec::negotiate`]).
    pub codec: Codec,
    /// The server takes resumable uploads: a large bundle survives a cut connection.
    pub resumable: bool,
    /// The largest archive the server takes, when it says.
    pub max_bundle_bytes: Option<u64>,
    /// The server takes incremental bundles: send the manifest and only what it lacks.
    pub incremental: bool,
}

/// A created session.
pub struct Launched {
    pub session: SessionResource,
    pub state: SessionState,
}

/// The prompt to send for what was typed: the keyword rewrite when it triggers. `None` when
/// nothing but the keyword (or nothing at all) was typed.
pub fn prompt_to_send(typed: &str) -> Option<String> {
    let found = keyword::detect(typed);
    if found.prompt_is_empty() || typed.trim().is_empty() {
        return None;
    }
    Some(found.prompt().trim().to_owned())
}

/// The `launch` command.
pub async fn command(env: &Env, args: &LaunchArgs) -> anyhow::Result<ExitCode> {
    let typed = args.prompt.join(" ");
    let prompt = match (prompt_to_send(&typed), &args.refine) {
        (Some(prompt), _) => prompt,
        (None, Some(_)) => DEFAULT_REFINE_PROMPT.to_owned(),
        (None, None) => {
            eprintln!("ultraplan: say what to plan, e.g. ultraplan \"fix the flaky login test\"");
            return Ok(ExitCode::from(USAGE));
        }
    };
    let draft_plan = match &args.refine {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the draft plan {}", path.display()))?,
        ),
        None => None,
    };
    let (client, settings) = env.client()?;
    let eligibility = check_eligible(&client, &settings).await?;
    if !args.yes {
        if !ui::interactive() {
            bail!(
                "not launching without confirmation: there is no terminal to ask on. Pass --yes \
                 to launch on {}",
                settings.server
            );
        }
        if !ui::confirm_launch(&settings.server)? {
            eprintln!("Not launched.");
            return Ok(ExitCode::FAILURE);
        }
    }
    let request = Request {
        prompt,
        draft_plan,
        environment: args.environment.clone(),
        repo: args.repo.clone(),
        watch: !args.no_watch && !super::no_watch(),
        quiet: args.json,
        codec: Codec::negotiate(&eligibility.accepts_bundle_encodings),
        resumable: eligibility.resumable_bundle_uploads,
        max_bundle_bytes: eligibility.max_bundle_bytes,
        incremental: eligibility.incremental_bundles,
    };
    let launched = run(env, &client, &settings, &request).await?;
    if args.json {
        let json = serde_json::to_string_pretty(&launched.session)?;
        println!("{}", ultraplan::sanitize::json(&json));
    } else {
        let review = super::sessions::signed_in_url(env, &launched.session.id)
            .await
            .unwrap_or_else(|| launched.session.url.clone());
        print_launched(&launched, &review);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_launched(launched: &Launched, review_url: &str) {
    let id = &ultraplan::sanitize::line(&launched.session.id);
    let title = ultraplan::sanitize::line(&launched.session.title);
    println!("◇ ultraplan launched: {title}");
    println!(
        "  Review the plan at {}",
        ultraplan::sanitize::line(review_url)
    );
    if launched.state.pid.is_some() {
        println!("  Polling in the background; follow it with `ultraplan status {id}`");
    } else {
        println!("  Follow it with `ultraplan watch {id}`");
    }
}

/// Fails with every reason in plain words when the server says no.
pub async fn check_eligible(client: &Client, settings: &Settings) -> anyhow::Result<Eligibility> {
    let eligibility = client
        .eligibility()
        .await
        .with_context(|| format!("asking {} whether ultraplan can run", settings.server))?;
    if eligibility.eligible {
        return Ok(eligibility);
    }
    let mut message = format!("{} cannot run ultraplan sessions now:", settings.server);
    for reason in &eligibility.reasons {
        let code = serde_json::to_value(reason.code)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        message.push_str(&format!("\n  - {} ({code})", reason.message));
    }
    if eligibility.reasons.is_empty() {
        message.push_str("\n  - the server gave no reason");
    }
    bail!(message)
}

/// Bundles, uploads (unless unchanged), creates the session, records it, starts the poller.
pub async fn run(
    env: &Env,
    client: &Client,
    settings: &Settings,
    request: &Request,
) -> anyhow::Result<Launched> {
    let bundle = match send_incremental(client, settings, request).await {
        Some(bundle) => bundle,
        None => {
            let (bundle, file) = make_bundle(&request.repo, request.codec, request.quiet).await?;
            let uploaded = upload(client, &bundle, &file, request).await;
            let _ = std::fs::remove_file(&file);
            uploaded?;
            bundle
        }
    };
    let mut create = launch::create_request(&request.prompt, &bundle, request.draft_plan.clone());
    create.session_context.environment = request.environment.clone();
    let session = client
        .create_session(&create)
        .await
        .context("creating the session")?;
    let mut state = SessionState::new(&session.id, &settings.server, &session.url, &session.title);
    state.repo_root = Some(bundle.root.clone());
    state.status = Some(session.session_status);
    env.store.save(&state)?;
    if request.watch {
        match watch::spawn_detached(&env.store, settings, &session.id) {
            Ok(pid) => {
                state.pid = Some(pid);
                env.store.update(&session.id, |s| s.pid = Some(pid))?;
            }
            Err(e) => ui::note(
                request.quiet,
                &format!("ultraplan: could not start the background poller: {e:#}"),
            ),
        }
    }
    Ok(Launched { session, state })
}

/// The tree sent as its manifest and the contents the server lacks, when the server takes
/// that; `None` (say why) when a whole bundle must go instead.
async fn send_incremental(
    client: &Client,
    settings: &Settings,
    request: &Request,
) -> Option<Bundle> {
    if !request.incremental || ultraplan::incremental::switched_off() {
        return None;
    }
    let places = ultraplan::incremental::Places {
        state_dir: ultraplan::paths::state_dir().ok()?,
        cache_dir: ultraplan::paths::cache_dir().ok()?,
        server: settings.server.clone(),
        token: settings.token.clone().unwrap_or_default(),
    };
    let spinner = ui::spinner(
        &format!("Sending {}", request.repo.display()),
        request.quiet,
    );
    let sent = ultraplan::incremental::send(client, &request.repo, &places).await;
    spinner.finish_and_clear();
    let sent = match sent {
        Ok(sent) => sent,
        Err(error) => {
            tracing::info!(%error, "incremental bundle failed; sending the whole bundle");
            ui::note(
                request.quiet,
                &format!(
                    "ultraplan: could not send only the changes ({error}); sending the whole bundle"
                ),
            );
            return None;
        }
    };
    let note = match &sent.uploaded {
        None => format!(
            "Bundle of {} files unchanged, not uploaded",
            sent.bundle.manifest.files
        ),
        Some(_) => format!(
            "Sent {} of {} files ({}{})",
            if sent.as_delta {
                "the changes"
            } else {
                "the manifest"
            },
            sent.bundle.manifest.files,
            human_bytes(sent.manifest_bytes + sent.contents_bytes),
            if sent.contents_bytes > 0 {
                ", contents the server lacked included"
            } else {
                ""
            }
        ),
    };
    tracing::info!(
        manifest_bytes = sent.manifest_bytes,
        contents_bytes = sent.contents_bytes,
        delta = sent.as_delta,
        hashed = sent.hashed,
        scan_ms = sent.timings.scan_ms,
        manifest_ms = sent.timings.manifest_ms,
        contents_ms = sent.timings.contents_ms,
        bundle_id = %sent.bundle.sha256,
        "incremental bundle sent"
    );
    ui::note(request.quiet, &note);
    Some(sent.bundle)
}

async fn make_bundle(repo: &Path, codec: Codec, quiet: bool) -> anyhow::Result<(Bundle, PathBuf)> {
    let dir = ultraplan::paths::cache_dir()?.join("bundles");
    let spinner = ui::spinner(&format!("Bundling {}", repo.display()), quiet);
    let repo_owned = repo.to_owned();
    let made = tokio::task::spawn_blocking(move || {
        let options = Options {
            codec,
            level: codec.default_level(),
            ..Options::default()
        };
        bundle::write_to_dir(&repo_owned, &dir, &options)
    })
    .await
    .context("the bundler stopped unexpectedly")?
    .with_context(|| format!("bundling {}", repo.display()));
    spinner.finish_and_clear();
    let (bundle, file) = made?;
    let secrets = bundle.skipped.len();
    let mut note = format!(
        "Bundled {} files ({}) from {}",
        bundle.manifest.files,
        human_bytes(bundle.manifest.bytes),
        bundle.root.display()
    );
    if secrets > 0 {
        note.push_str(&format!("; left out {secrets} (secrets, special files)"));
    }
    ui::note(quiet, &note);
    Ok((bundle, file))
}

async fn upload(
    client: &Client,
    bundle: &Bundle,
    file: &Path,
    request: &Request,
) -> anyhow::Result<()> {
    let quiet = request.quiet;
    let archive_bytes = std::fs::metadata(file).map_or(0, |m| m.len());
    if let Some(max) = request.max_bundle_bytes.filter(|max| archive_bytes > *max) {
        // Refused here, before a byte is sent: a server that refuses a body it has not read
        // may close the connection before its answer can be read.
        let why = format!("it takes at most {}", human_bytes(max));
        bail!(too_large(bundle, archive_bytes, &why));
    }
    let bar = ui::bytes_bar(archive_bytes, "Uploading", quiet);
    let progress_bar = bar.clone();
    let progress: launch::Progress = Arc::new(move |sent| progress_bar.set_position(sent));
    let result = launch::upload(client, file, bundle, progress, request.resumable).await;
    bar.finish_and_clear();
    if let Err(launch::UploadError::Api(error)) = &result
        && error.code() == Some("too_large")
    {
        bail!(too_large(bundle, archive_bytes, &error.to_string()));
    }
    match result.context("uploading the bundle")? {
        Upload::Unchanged => ui::note(quiet, "bundle unchanged, not uploaded"),
        Upload::Uploaded(up) => ui::note(
            quiet,
            &format!("Uploaded the bundle ({})", human_bytes(up.bytes)),
        ),
    }
    Ok(())
}

/// What to say when the server refuses a bundle for its size: nothing was cut to fit, so
/// the user decides what to leave out.
fn too_large(bundle: &Bundle, archive_bytes: u64, why: &str) -> String {
    let mut message = format!(
        "The bundle of {} is {} compressed, and the server refused it: {why}.\n\
         Nothing was sent in part. Leave large files out with a .ultraplanignore file at the \
         repository's root (the syntax of .gitignore; it also leaves out tracked files).",
        bundle.root.display(),
        human_bytes(archive_bytes)
    );
    if !bundle.largest.is_empty() {
        message.push_str("\nThe largest files:");
        for (path, size) in &bundle.largest {
            let path = ultraplan::sanitize::line(path);
            message.push_str(&format!("\n  {} ({path})", human_bytes(*size)));
        }
    }
    message
}

/// `532 B`, `12.4 KB`, `3.1 MB`.
pub fn human_bytes(n: u64) -> String {
    #[allow(clippy::cast_precision_loss)] // one decimal shown
    let f = n as f64;
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{:.1} KB", f / 1024.0),
        _ => format!("{:.1} MB", f / 1_048_576.0),
    }
}
