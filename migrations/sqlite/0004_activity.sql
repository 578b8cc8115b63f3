-- Subagents and tool calls per session, folded from the log as events are appended.
ALTER TABLE sessions ADD COLUMN activity TEXT NOT NULL DEFAULT '{}';
