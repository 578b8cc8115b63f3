-- Secrets users keep on the server for their environments' setup phase (docs/ARCHITECTURE.md
-- §6.5). Each value is sealed with AES-256-GCM under the server's secrets key, with the owner
-- id and the name as associated data, so a row copied to another owner or name does not open.
-- Timestamps are unix milliseconds.
CREATE TABLE secrets (
    owner_id    TEXT NOT NULL REFERENCES users(id),
    name        TEXT NOT NULL,
    nonce       BYTEA NOT NULL,
    ciphertext  BYTEA NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (owner_id, name)
);
