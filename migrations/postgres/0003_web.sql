-- Web review pages: one-time login links and browser sessions. Only SHA-256 hashes of their
-- secrets are stored; the CSRF token of a browser session is random and checked on every form.
CREATE TABLE web_login_links (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id),
    hash        TEXT NOT NULL,
    next_path   TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
CREATE INDEX web_login_links_by_expiry ON web_login_links (expires_at);

CREATE TABLE web_sessions (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id),
    hash        TEXT NOT NULL,
    csrf        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX web_sessions_by_expiry ON web_sessions (expires_at);

-- The sessions list shows whether each session's last `result` failed.
CREATE INDEX events_by_kind ON events (session_id, kind, id);
