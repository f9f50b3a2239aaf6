-- Idempotent sends: the turn a client's Idempotency-Key created, so that a
-- retry within the window gets that turn instead of a second one. The
-- primary key is what makes two concurrent first sends create one turn.
CREATE TABLE idempotency_keys (
    tenant_id       text NOT NULL,
    scope           text NOT NULL,
    key             text NOT NULL,
    request_hash    bytea NOT NULL,
    conversation_id text NOT NULL DEFAULT '',
    message_id      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
