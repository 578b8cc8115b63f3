//! The Docker runner (bollard): the static agent in a `FROM scratch` image built locally, with
//! no network, a read-only root, every capability dropped, no new privileges, a non-root
//! user, memory/CPU/pids limits and the bundle mounted read-only. Containers carry labels so
//! orphans from a crashed server are swept at start-up.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig, ResourcesUlimits};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, BuildImageOptionsBuilder, CreateContainerOptionsBuilder,
    KillContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
    WaitContainerOptions,
};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;

use super::SandboxError;
use super::launch::{AgentExit, AgentProcess};
use super::spec::{
    AGENT_MOUNT, SANDBOX_UID, SandboxRequest, TMP_BYTES, TOOLCHAIN_DIRS, TOOLCHAIN_ETC,
    WORKSPACE_MOUNT,
};
use ultraplan_protocol::environment::{EGRESS_SOCKET_MOUNT, ENV_MOUNT, ENV_VAR};

/// Label on every container the server starts.
pub const MANAGED_LABEL: &str = "dev.ultraplan.managed";
/// Label naming the session a container runs.
pub const SESSION_LABEL: &str = "dev.ultraplan.session";
/// Label naming the server instance that started a container.
pub const INSTANCE_LABEL: &str = "dev.ultraplan.instance";

fn unavailable(what: &str, e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Unavailable(format!("docker: {what}: {e}"))
}

/// A connected Docker daemon and the agent image.
#[derive(Clone)]
pub struct DockerRunner {
    docker: Docker,
    image: String,
    instance: String,
    seccomp: bool,
}

impl std::fmt::Debug for DockerRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerRunner")
            .field("image", &self.image)
            .finish()
    }
}

/// The container the request describes (pure; unit-tested).
pub fn container_spec(req: &SandboxRequest, image: &str, instance: &str) -> ContainerCreateBody {
    container_spec_with(req, image, instance, &[], super::server_uid())
}

/// [`container_spec`] with the host toolchain paths that exist (bound read-only when the
/// workspace is writable) and the server's uid (an execution container of a non-root server
/// runs as that uid so it can write the workspace the server owns).
pub fn container_spec_with(
    req: &SandboxRequest,
    image: &str,
    instance: &str,
    toolchain: &[String],
    server_uid: u32,
) -> ContainerCreateBody {
    let mode = if req.writable { "rw" } else { "ro" };
    let limits = &req.limits;
    let mut binds = vec![format!(
        "{}:{WORKSPACE_MOUNT}:{mode}",
        req.workspace.display()
    )];
    if req.toolchain() {
        binds.extend(toolchain.iter().map(|p| format!("{p}:{p}:ro")));
    }
    if req.base_image.is_some() {
        // Another image: the agent comes in as a read-only file.
        binds.push(format!("{}:{AGENT_MOUNT}:ro", req.agent_binary.display()));
    }
    if let Some(dir) = &req.environment {
        let mode = if req.setup() { "rw" } else { "ro" };
        binds.push(format!("{}:{ENV_MOUNT}:{mode}", dir.display()));
    }
    if let Some(socket) = req.egress() {
        binds.push(format!("{}:{EGRESS_SOCKET_MOUNT}", socket.display()));
    }
    let mut env = vec![
        format!("ULTRAPLAN_WORKSPACE={WORKSPACE_MOUNT}"),
        format!("ULTRAPLAN_LOG={}", req.log_filter),
        "HOME=/tmp".to_owned(),
    ];
    if req.environment.is_some() {
        env.push(format!("{ENV_VAR}={ENV_MOUNT}"));
    }
    // The image's entrypoint is the agent; a setup run passes it `setup`.
    let cmd = if req.setup() {
        req.agent_args().iter().map(|a| (*a).to_owned()).collect()
    } else {
        vec![AGENT_MOUNT.to_owned()]
    };
    let uid = if (req.writable || req.setup()) && server_uid != 0 {
        server_uid
    } else {
        SANDBOX_UID
    };
    let host_config = HostConfig {
        network_mode: Some("none".to_owned()),
        readonly_rootfs: Some(true),
        cap_drop: Some(vec!["ALL".to_owned()]),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        memory: i64::try_from(limits.memory_bytes).ok(),
        // Memory plus swap equals memory: no swap at all.
        memory_swap: i64::try_from(limits.memory_bytes).ok(),
        nano_cpus: Some(1_000_000_000),
        pids_limit: i64::try_from(limits.processes).ok(),
        binds: Some(binds),
        tmpfs: Some(HashMap::from([(
            "/tmp".to_owned(),
            format!("rw,nosuid,nodev,size={TMP_BYTES},mode=1777"),
        )])),
        ulimits: Some(vec![ResourcesUlimits {
            name: Some("fsize".to_owned()),
            soft: i64::try_from(limits.file_size_bytes).ok(),
            hard: i64::try_from(limits.file_size_bytes).ok(),
        }]),
        ..HostConfig::default()
    };
    let (image, entrypoint, cmd) = match &req.base_image {
        Some(base) => (
            base.as_str(),
            Some(vec![AGENT_MOUNT.to_owned()]),
            req.agent_args().iter().map(|a| (*a).to_owned()).collect(),
        ),
        None => (image, None, cmd),
    };
    ContainerCreateBody {
        image: Some(image.to_owned()),
        entrypoint,
        cmd: Some(cmd),
        user: Some(format!("{uid}:{uid}")),
        working_dir: Some(WORKSPACE_MOUNT.to_owned()),
        env: Some(env),
        labels: Some(HashMap::from([
            (MANAGED_LABEL.to_owned(), "true".to_owned()),
            (SESSION_LABEL.to_owned(), req.session_id.clone()),
            (INSTANCE_LABEL.to_owned(), instance.to_owned()),
        ])),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        open_stdin: Some(true),
        stdin_once: Some(true),
        tty: Some(false),
        network_disabled: Some(true),
        host_config: Some(host_config),
        ..ContainerCreateBody::default()
    }
}

/// The toolchain paths present on this host.
fn existing_toolchain() -> Vec<String> {
    TOOLCHAIN_DIRS
        .iter()
        .chain(TOOLCHAIN_ETC.iter())
        .filter(|p| Path::new(p).exists())
        .map(|p| (*p).to_owned())
        .collect()
}

/// The Dockerfile of the agent image.
const DOCKERFILE: &str = "FROM scratch\nCOPY ultraplan-agent /ultraplan-agent\nUSER 65534:65534\n\
                          WORKDIR /workspace\nENTRYPOINT [\"/ultraplan-agent\"]\n";

fn build_context(agent: &[u8]) -> Result<Vec<u8>, std::io::Error> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, data, mode) in [
        ("Dockerfile", DOCKERFILE.as_bytes(), 0o644),
        ("ultraplan-agent", agent, 0o755),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        builder.append_data(&mut header, name, data)?;
    }
    builder.into_inner()
}

impl DockerRunner {
    /// Connect, sweep orphans, and make sure the agent image exists (built in-process from
    /// the static binary; no registry is contacted).
    pub async fn prepare(agent_binary: &Path, instance: &str) -> Result<Self, SandboxError> {
        let docker = Docker::connect_with_local_defaults()
            .map_err(|e| unavailable("cannot connect", e))?
            .negotiate_version()
            .await
            .map_err(|e| unavailable("the daemon does not answer", e))?;
        docker
            .ping()
            .await
            .map_err(|e| unavailable("the daemon does not answer", e))?;
        let agent = tokio::fs::read(agent_binary)
            .await
            .map_err(|e| unavailable(&format!("reading {}", agent_binary.display()), e))?;
        let digest = hex::encode(Sha256::digest(&agent));
        let image = format!("ultraplan-agent:{}", &digest[..12]);
        // Containers keep the daemon's default seccomp profile (nothing here overrides it).
        let seccomp = docker.info().await.is_ok_and(|info| {
            info.security_options
                .unwrap_or_default()
                .iter()
                .any(|o| o.contains("name=seccomp"))
        });
        let runner = DockerRunner {
            docker,
            image,
            instance: instance.to_owned(),
            seccomp,
        };
        runner.sweep_orphans().await;
        if runner.docker.inspect_image(&runner.image).await.is_err() {
            runner.build_image(&agent).await?;
        }
        Ok(runner)
    }

    /// Whether the daemon applies its default seccomp profile to containers.
    pub fn seccomp(&self) -> bool {
        self.seccomp
    }

    async fn build_image(&self, agent: &[u8]) -> Result<(), SandboxError> {
        let context = build_context(agent).map_err(|e| unavailable("build context", e))?;
        let options = BuildImageOptionsBuilder::new()
            .dockerfile("Dockerfile")
            .t(&self.image)
            .rm(true)
            .forcerm(true)
            .build();
        let mut stream =
            self.docker
                .build_image(options, None, Some(bollard::body_full(context.into())));
        while let Some(item) = stream.next().await {
            let info = item.map_err(|e| unavailable("building the agent image", e))?;
            if let Some(detail) = info.error_detail {
                let message = detail.message.unwrap_or_default();
                return Err(unavailable("building the agent image", message));
            }
        }
        tracing::info!(image = %self.image, "built the agent image");
        Ok(())
    }

    fn own_containers(&self) -> HashMap<&'static str, Vec<String>> {
        HashMap::from([(
            "label",
            vec![
                format!("{MANAGED_LABEL}=true"),
                format!("{INSTANCE_LABEL}={}", self.instance),
            ],
        )])
    }

    /// Remove containers a previous run of this server instance left behind.
    pub async fn sweep_orphans(&self) {
        let filters = self.own_containers();
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let Ok(containers) = self.docker.list_containers(Some(options)).await else {
            return;
        };
        for id in containers.into_iter().filter_map(|c| c.id) {
            tracing::warn!(container = %id, "removing an orphaned agent container");
            remove(&self.docker, &id).await;
        }
    }

    /// Containers this server instance manages right now (for tests and metrics).
    pub async fn managed_containers(&self) -> Result<Vec<String>, SandboxError> {
        let filters = self.own_containers();
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| unavailable("listing containers", e))?;
        Ok(containers.into_iter().filter_map(|c| c.id).collect())
    }

    /// Create, attach and start the agent's container.
    /// The id of `reference` when the engine has that image (runners never pull).
    pub async fn image_id(&self, reference: &str) -> Result<String, SandboxError> {
        let inspected = self.docker.inspect_image(reference).await.map_err(|e| {
            SandboxError::Unavailable(format!(
                "the base image {reference} is not on this runner's Docker engine ({e}); \
                 images are never pulled: load it there first (docker pull or docker load)"
            ))
        })?;
        inspected
            .id
            .ok_or_else(|| SandboxError::Unavailable(format!("the image {reference} has no id")))
    }

    pub async fn launch(&self, req: &SandboxRequest) -> Result<AgentProcess, SandboxError> {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("ultraplan-{}-{}", req.session_id, &suffix[..8]);
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        self.docker
            .create_container(
                Some(options),
                container_spec_with(
                    req,
                    &self.image,
                    &self.instance,
                    &existing_toolchain(),
                    super::server_uid(),
                ),
            )
            .await
            .map_err(|e| unavailable("creating the container", e))?;
        let attach = AttachContainerOptionsBuilder::new()
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .stream(true)
            .build();
        let attached = match self.docker.attach_container(&name, Some(attach)).await {
            Ok(attached) => attached,
            Err(e) => {
                remove(&self.docker, &name).await;
                return Err(unavailable("attaching to the container", e));
            }
        };
        if let Err(e) = self.docker.start_container(&name, None).await {
            remove(&self.docker, &name).await;
            return Err(unavailable("starting the container", e));
        }
        let (stdout, stderr) = demux(attached.output);
        let handle = ContainerHandle {
            docker: self.docker.clone(),
            exit: Some(watch_exit(self.docker.clone(), name.clone())),
            name,
        };
        Ok(AgentProcess::container(
            attached.input,
            stdout,
            stderr,
            handle,
        ))
    }
}

/// Split Docker's multiplexed output into stdout and stderr pipes.
fn demux(
    mut output: std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
    >,
) -> (super::launch::AgentOutput, super::launch::AgentOutput) {
    let (mut out_tx, out_rx) = tokio::io::duplex(1 << 16);
    let (mut err_tx, err_rx) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        while let Some(Ok(chunk)) = output.next().await {
            let written = match chunk {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    out_tx.write_all(&message).await
                }
                LogOutput::StdErr { message } => err_tx.write_all(&message).await,
                LogOutput::StdIn { .. } => Ok(()),
            };
            if written.is_err() {
                return;
            }
        }
    });
    (Box::pin(out_rx), Box::pin(err_rx))
}

fn watch_exit(docker: Docker, name: String) -> JoinHandle<AgentExit> {
    tokio::spawn(async move {
        let options = WaitContainerOptions {
            condition: "not-running".to_owned(),
        };
        let mut waits = docker.wait_container(&name, Some(options));
        let code = match waits.next().await {
            Some(Ok(response)) => response.status_code,
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
            Some(Err(e)) => {
                return AgentExit {
                    success: false,
                    description: format!("waiting on the container failed: {e}"),
                    code: None,
                };
            }
            None => -1,
        };
        AgentExit {
            success: code == 0,
            description: format!("container exit code {code}"),
            code: i32::try_from(code).ok().filter(|c| *c >= 0),
        }
    })
}

/// Remove a container. When Docker cannot do it now (the daemon is restarting: it killed the
/// agent on its way down), keep trying in the background so no container is left behind.
async fn remove(docker: &Docker, name: &str) {
    let Err(error) = try_remove(docker, name).await else {
        return;
    };
    if is_gone(&error) {
        tracing::debug!(%error, container = name, "container already gone");
        return;
    }
    tracing::warn!(%error, container = name, "cannot remove the container now; retrying");
    let (docker, name) = (docker.clone(), name.to_owned());
    tokio::spawn(async move {
        let mut delay = std::time::Duration::from_secs(1);
        for _ in 0..REMOVE_RETRIES {
            tokio::time::sleep(delay).await;
            match try_remove(&docker, &name).await {
                Ok(()) => {
                    tracing::info!(container = %name, "removed the container on a later try");
                    return;
                }
                Err(error) if is_gone(&error) => return,
                Err(_) => delay = (delay * 2).min(std::time::Duration::from_secs(10)),
            }
        }
        tracing::error!(container = %name, "gave up removing the container");
    });
}

/// Tries of a removal Docker refused: about ten minutes with the backoff above.
const REMOVE_RETRIES: u32 = 64;

async fn try_remove(docker: &Docker, name: &str) -> Result<(), bollard::errors::Error> {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    docker.remove_container(name, Some(options)).await
}

/// Docker says there is no such container.
fn is_gone(error: &bollard::errors::Error) -> bool {
    matches!(
        error,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// Stops and reaps one container.
pub struct ContainerHandle {
    docker: Docker,
    name: String,
    exit: Option<JoinHandle<AgentExit>>,
}

impl ContainerHandle {
    /// Kill the container in the background.
    pub fn start_kill(&self) {
        let docker = self.docker.clone();
        let name = self.name.clone();
        tokio::spawn(async move {
            let options = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
            let _ = docker.kill_container(&name, Some(options)).await;
        });
    }

    /// Wait for the container to stop, then remove it.
    pub async fn wait(&mut self) -> Option<AgentExit> {
        let exit = match self.exit.take() {
            Some(handle) => handle.await.ok(),
            None => None,
        };
        remove(&self.docker, &self.name).await;
        exit
    }
}

#[cfg(test)]
#[path = "docker_tests.rs"]
mod tests;
