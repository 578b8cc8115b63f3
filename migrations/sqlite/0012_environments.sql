-- Named environments (docs/ARCHITECTURE.md §6.5): the TOML of an environment file kept on the
-- server under a name, per owner. An owner_id of '' marks one the operator shares with every
-- user (`ultraplan-server env add --shared`). Timestamps are unix milliseconds.
CREATE TABLE environments (
    owner_id    TEXT NOT NULL,
    name        TEXT NOT NULL,
    definition  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (owner_id, name)
);
