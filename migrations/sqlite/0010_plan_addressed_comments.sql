-- What the agent says a revision addresses (docs/ARCHITECTURE.md §3.2): the comment ids its
-- ExitPlanMode call named in `addressed_comment_ids`, as a JSON array, shape-checked but not
-- matched against the comments (readers count only ids of comments on the revision before).
-- NULL: the agent named none, so the previous revision's comments count as addressed by the
-- newer revision alone.
ALTER TABLE plans ADD COLUMN addressed_comment_ids TEXT;
