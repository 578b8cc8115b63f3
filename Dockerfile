# The ultraplan server and the keyless runner, with the static agent beside them.
#
# By default the image runs `ultraplan-server serve`: agents run in sibling containers started
# through the Docker socket (ULTRAPLAN_RUNNER=docker); the server builds the
# `ultraplan-agent:<hash>` image from the static binary at start-up, with no registry pull.
# git diffs the workspaces of remotely executed plans into patches.
#
# The runner replicas of deploy/ run the same image with the entrypoint `ultraplan-runner`
# instead: it dials out to the server, holds no database URL, bucket or model keys, and
# sandboxes agents inside its own (privileged) container with bubblewrap (ULTRAPLAN_RUNNER=bwrap
# there; this image's default, docker, would need the Docker socket). It serves no HTTP, so
# those services replace the HEALTHCHECK below, which is the server's.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p ultraplan-server -p ultraplan-runner \
 && RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked \
      --target x86_64-unknown-linux-gnu -p ultraplan-agent

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates curl git util-linux \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/ultraplan --create-home ultraplan
COPY --from=build /src/target/release/ultraplan-server /usr/local/bin/ultraplan-server
COPY --from=build /src/target/release/ultraplan-runner /usr/local/bin/ultraplan-runner
COPY --from=build /src/target/x86_64-unknown-linux-gnu/release/ultraplan-agent /usr/local/bin/ultraplan-agent
USER ultraplan
ENV ULTRAPLAN_BIND=0.0.0.0:7878 \
    ULTRAPLAN_DATA_DIR=/var/lib/ultraplan \
    ULTRAPLAN_AGENT_BIN=/usr/local/bin/ultraplan-agent \
    ULTRAPLAN_RUNNER=docker
EXPOSE 7878
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s \
  CMD curl -fsS http://127.0.0.1:7878/healthz || exit 1
ENTRYPOINT ["ultraplan-server"]
CMD ["serve"]
