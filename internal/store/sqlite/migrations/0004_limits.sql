-- The key each request was made with (budgets and the admin API's usage
-- by key) and its time to first word; older rows have neither.
ALTER TABLE usage ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN ttfw_ms REAL NOT NULL DEFAULT 0;
CREATE INDEX usage_key_time ON usage(key_id, created_at);

-- Limits and budgets set through the admin API, per tenant or key, over
-- the config's. settings is JSON (internal/limits.Override).
CREATE TABLE limit_overrides (
	scope      TEXT NOT NULL,
	subject_id TEXT NOT NULL,
	settings   TEXT NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (scope, subject_id)
);
