-- Times are INTEGER microseconds since the Unix epoch, UTC.
-- JSON columns (timings, meta) are TEXT, NULL when empty.

CREATE TABLE tenants (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	created_at INTEGER NOT NULL
);

CREATE TABLE api_keys (
	id         TEXT PRIMARY KEY,
	tenant_id  TEXT NOT NULL REFERENCES tenants(id),
	user_id    TEXT NOT NULL,
	name       TEXT NOT NULL,
	prefix     TEXT NOT NULL,
	hash       BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
);
CREATE INDEX api_keys_prefix ON api_keys(prefix);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id, created_at);

CREATE TABLE conversations (
	id         TEXT PRIMARY KEY,
	tenant_id  TEXT NOT NULL REFERENCES tenants(id),
	user_id    TEXT NOT NULL,
	title      TEXT NOT NULL,
	model      TEXT NOT NULL,
	-- last_seq is the Seq of the newest message: AddMessage increments it in
	-- the same statement that checks the tenant and bumps updated_at.
	last_seq   INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE INDEX conversations_tenant ON conversations(tenant_id, updated_at, id);
CREATE INDEX conversations_user ON conversations(tenant_id, user_id, updated_at, id);

CREATE TABLE messages (
	id              TEXT PRIMARY KEY,
	conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
	tenant_id       TEXT NOT NULL,
	seq             INTEGER NOT NULL,
	role            TEXT NOT NULL,
	content         TEXT NOT NULL,
	status          TEXT NOT NULL,
	finish_reason   TEXT NOT NULL,
	model           TEXT NOT NULL,
	deployment      TEXT NOT NULL,
	input_tokens    INTEGER NOT NULL,
	output_tokens   INTEGER NOT NULL,
	cached_tokens   INTEGER NOT NULL,
	estimated       INTEGER NOT NULL,
	cost            REAL NOT NULL,
	timings         TEXT,
	meta            TEXT,
	error_code      TEXT NOT NULL,
	error_message   TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	UNIQUE (conversation_id, seq)
);
-- Only InterruptStreaming looks for streaming rows; a partial index keeps
-- that a small lookup instead of a scan of every message.
CREATE INDEX messages_streaming ON messages(id) WHERE status = 'streaming';

CREATE TABLE usage (
	request_id    TEXT NOT NULL,
	tenant_id     TEXT NOT NULL,
	user_id       TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	surface       TEXT NOT NULL,
	model         TEXT NOT NULL,
	deployment    TEXT NOT NULL,
	status        TEXT NOT NULL,
	input_tokens  INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	cached_tokens INTEGER NOT NULL,
	estimated     INTEGER NOT NULL,
	cost          REAL NOT NULL,
	ttft_ms       REAL NOT NULL,
	total_ms      REAL NOT NULL
);
CREATE INDEX usage_time ON usage(created_at);
CREATE INDEX usage_tenant_time ON usage(tenant_id, created_at);
