-- ultraplan schema, PostgreSQL flavour. Timestamps are unix milliseconds; JSON is stored as TEXT.
CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL
);

CREATE TABLE api_tokens (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id),
    salt          TEXT NOT NULL,
    hash          TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT
);

CREATE TABLE bundles (
    sha256          TEXT PRIMARY KEY,
    files           BIGINT NOT NULL,
    bytes           BIGINT NOT NULL,
    unpacked_bytes  BIGINT NOT NULL,
    created_at      BIGINT NOT NULL
);

CREATE TABLE bundle_owners (
    sha256      TEXT NOT NULL REFERENCES bundles(sha256),
    user_id     TEXT NOT NULL REFERENCES users(id),
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (sha256, user_id)
);

CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    user_id           TEXT NOT NULL REFERENCES users(id),
    title             TEXT NOT NULL,
    bundle_id         TEXT,
    status            TEXT NOT NULL,
    context           TEXT NOT NULL,
    usage             TEXT NOT NULL,
    last_event_id     BIGINT NOT NULL DEFAULT 0,
    plan_revisions    BIGINT NOT NULL DEFAULT 0,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    last_activity_at  BIGINT NOT NULL,
    archived_at       BIGINT
);
CREATE INDEX sessions_by_user ON sessions (user_id, created_at);
CREATE INDEX sessions_by_status ON sessions (status);

CREATE TABLE events (
    session_id          TEXT NOT NULL REFERENCES sessions(id),
    id                  BIGINT NOT NULL,
    kind                TEXT NOT NULL,
    parent_tool_use_id  TEXT,
    body                TEXT NOT NULL,
    created_at          BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);

CREATE TABLE plans (
    session_id         TEXT NOT NULL REFERENCES sessions(id),
    tool_use_id        TEXT NOT NULL,
    revision           BIGINT NOT NULL,
    plan               TEXT NOT NULL,
    status             TEXT NOT NULL,
    decision           TEXT,
    event_id           BIGINT NOT NULL,
    decision_event_id  BIGINT,
    created_at         BIGINT NOT NULL,
    decided_at         BIGINT,
    PRIMARY KEY (session_id, tool_use_id)
);

CREATE TABLE flags (
    name         TEXT NOT NULL,
    user_id      TEXT NOT NULL DEFAULT '',
    value        TEXT NOT NULL,
    rollout_pct  BIGINT,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (name, user_id)
);

CREATE TABLE telemetry (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT NOT NULL,
    labels      TEXT NOT NULL,
    user_id     TEXT,
    session_id  TEXT,
    created_at  BIGINT NOT NULL
);
CREATE INDEX telemetry_by_name ON telemetry (name, created_at);
