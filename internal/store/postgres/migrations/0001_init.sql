-- JSON columns (timings, meta) are json, not jsonb, so that they read back
-- byte for byte as written; NULL when empty.

CREATE TABLE tenants (
	id         text PRIMARY KEY,
	name       text NOT NULL,
	created_at timestamptz NOT NULL
);

CREATE TABLE api_keys (
	id         text PRIMARY KEY,
	tenant_id  text NOT NULL REFERENCES tenants(id),
	user_id    text NOT NULL,
	name       text NOT NULL,
	prefix     text NOT NULL,
	hash       bytea NOT NULL,
	created_at timestamptz NOT NULL,
	revoked_at timestamptz
);
CREATE INDEX api_keys_prefix ON api_keys(prefix);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id, created_at);

CREATE TABLE conversations (
	id         text PRIMARY KEY,
	tenant_id  text NOT NULL REFERENCES tenants(id),
	user_id    text NOT NULL,
	title      text NOT NULL,
	model      text NOT NULL,
	-- last_seq is the Seq of the newest message: AddMessage increments it in
	-- the statement that checks the tenant and bumps updated_at, and the row
	-- lock that takes serialises concurrent appends to one conversation.
	last_seq   bigint NOT NULL DEFAULT 0,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
);
CREATE INDEX conversations_tenant ON conversations(tenant_id, updated_at, id);
CREATE INDEX conversations_user ON conversations(tenant_id, user_id, updated_at, id);

CREATE TABLE messages (
	id              text PRIMARY KEY,
	conversation_id text NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
	tenant_id       text NOT NULL,
	seq             bigint NOT NULL,
	role            text NOT NULL,
	content         text NOT NULL,
	status          text NOT NULL,
	finish_reason   text NOT NULL,
	model           text NOT NULL,
	deployment      text NOT NULL,
	input_tokens    bigint NOT NULL,
	output_tokens   bigint NOT NULL,
	cached_tokens   bigint NOT NULL,
	estimated       boolean NOT NULL,
	cost            double precision NOT NULL,
	timings         json,
	meta            json,
	error_code      text NOT NULL,
	error_message   text NOT NULL,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	UNIQUE (conversation_id, seq)
);
-- Only InterruptStreaming looks for streaming rows; a partial index keeps
-- that a small lookup instead of a scan of every message.
CREATE INDEX messages_streaming ON messages(id) WHERE status = 'streaming';

CREATE TABLE usage (
	request_id    text NOT NULL,
	tenant_id     text NOT NULL,
	user_id       text NOT NULL,
	created_at    timestamptz NOT NULL,
	surface       text NOT NULL,
	model         text NOT NULL,
	deployment    text NOT NULL,
	status        text NOT NULL,
	input_tokens  bigint NOT NULL,
	output_tokens bigint NOT NULL,
	cached_tokens bigint NOT NULL,
	estimated     boolean NOT NULL,
	cost          double precision NOT NULL,
	ttft_ms       double precision NOT NULL,
	total_ms      double precision NOT NULL
);
CREATE INDEX usage_time ON usage(created_at);
CREATE INDEX usage_tenant_time ON usage(tenant_id, created_at);
