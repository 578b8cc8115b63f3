-- Agent runtime state per session, and every model call with its usage.
ALTER TABLE sessions ADD COLUMN agent_state TEXT NOT NULL DEFAULT 'none';

CREATE TABLE model_calls (
    id                           BIGSERIAL PRIMARY KEY,
    session_id                   TEXT NOT NULL REFERENCES sessions(id),
    model                        TEXT NOT NULL,
    input_tokens                 BIGINT NOT NULL,
    output_tokens                BIGINT NOT NULL,
    cache_read_input_tokens      BIGINT NOT NULL,
    cache_creation_input_tokens  BIGINT NOT NULL,
    attempts                     BIGINT NOT NULL,
    error                        TEXT,
    created_at                   BIGINT NOT NULL
);
CREATE INDEX model_calls_by_session ON model_calls (session_id, id);
