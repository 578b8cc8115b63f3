-- Sessions are claimed by runners under leases (docs/ARCHITECTURE.md §5.4): who holds the
-- session, the fencing epoch every one of its writes must carry, when the lease lapses, when
-- the session last went back to the queue, and since when it waits for a runner.
ALTER TABLE sessions ADD COLUMN lease_runner TEXT;
ALTER TABLE sessions ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN lease_expires_at BIGINT;
ALTER TABLE sessions ADD COLUMN queued_at BIGINT;
ALTER TABLE sessions ADD COLUMN requeued_at BIGINT;
CREATE INDEX sessions_wanting_runner ON sessions (agent_state, queued_at);

-- Who wrote each event: 'user' for messages and decisions (what a runner delivers to its
-- agent), 'runner' for everything the agent and the harness wrote.
ALTER TABLE events ADD COLUMN author TEXT NOT NULL DEFAULT 'runner';
