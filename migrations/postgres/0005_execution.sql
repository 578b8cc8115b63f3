-- Remote execution: where it stands per session, and the patch it produced.
ALTER TABLE sessions ADD COLUMN execution TEXT;

CREATE TABLE patches (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id),
    diff BYTEA NOT NULL,
    summary TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
