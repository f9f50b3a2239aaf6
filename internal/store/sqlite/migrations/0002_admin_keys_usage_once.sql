-- Admin keys reach the operators' routes and every tenant's views.
ALTER TABLE api_keys ADD COLUMN admin INTEGER NOT NULL DEFAULT 0;

-- One usage row per request: a batch retried after a write whose outcome
-- was unknown (a timeout) inserts nothing twice.
DELETE FROM usage WHERE rowid NOT IN (SELECT min(rowid) FROM usage GROUP BY request_id);
CREATE UNIQUE INDEX usage_request ON usage(request_id);
