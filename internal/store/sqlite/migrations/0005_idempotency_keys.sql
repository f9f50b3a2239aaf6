-- Idempotent sends: the turn a client's Idempotency-Key created, so that a
-- retry within the window gets that turn instead of a second one. The
-- primary key is what makes two concurrent first sends create one turn.
CREATE TABLE idempotency_keys (
    tenant_id       TEXT NOT NULL,
    scope           TEXT NOT NULL,
    key             TEXT NOT NULL,
    request_hash    BLOB NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    message_id      TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, scope, key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
