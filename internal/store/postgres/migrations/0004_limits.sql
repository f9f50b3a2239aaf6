-- The key each request was made with (budgets and the admin API's usage
-- by key) and its time to first word; older rows have neither.
ALTER TABLE usage ADD COLUMN key_id text NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN ttfw_ms double precision NOT NULL DEFAULT 0;
CREATE INDEX usage_key_time ON usage(key_id, created_at);

-- Limits and budgets set through the admin API, per tenant or key, over
-- the config's. settings is JSON (internal/limits.Override).
CREATE TABLE limit_overrides (
	scope      text NOT NULL,
	subject_id text NOT NULL,
	settings   text NOT NULL,
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (scope, subject_id)
);
