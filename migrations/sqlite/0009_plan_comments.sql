-- Inline comments on a plan's passages (docs/ARCHITECTURE.md §3.2): each on one plan revision,
-- quoting its passage verbatim with the headings above it (a JSON array). `state` is `open`
-- or `reopened` (carried over to a later revision as the comment `reopened_from` names);
-- "addressed" is derived: a newer revision of the plan exists.
CREATE TABLE plan_comments (
    id             TEXT PRIMARY KEY,
    session_id     TEXT NOT NULL,
    tool_use_id    TEXT NOT NULL,
    quote          TEXT NOT NULL,
    heading_path   TEXT NOT NULL,
    body           TEXT NOT NULL,
    author_id      TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    state          TEXT NOT NULL,
    reopened_from  TEXT,
    FOREIGN KEY (session_id, tool_use_id) REFERENCES plans (session_id, tool_use_id)
);

CREATE INDEX plan_comments_by_plan ON plan_comments (session_id, tool_use_id, created_at);
