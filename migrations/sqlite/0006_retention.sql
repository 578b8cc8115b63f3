-- Retention and quotas: finding the sessions that use a bundle, and the bundles a user holds.
CREATE INDEX sessions_by_bundle ON sessions (bundle_id);
CREATE INDEX bundle_owners_by_user ON bundle_owners (user_id, created_at);
