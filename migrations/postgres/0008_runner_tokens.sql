-- Runners of the fleet authenticate with their own tokens (docs/ARCHITECTURE.md §5.2), kept
-- apart from users' API tokens: only the SHA-256 of each token is stored, looked up by it.
CREATE TABLE runner_tokens (
    name TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
