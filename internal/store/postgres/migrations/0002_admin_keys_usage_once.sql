-- Admin keys reach the operators' routes and every tenant's views.
ALTER TABLE api_keys ADD COLUMN admin boolean NOT NULL DEFAULT false;

-- One usage row per request: a batch retried after a write whose outcome
-- was unknown (a timeout) inserts nothing twice.
DELETE FROM usage a USING usage b WHERE a.request_id = b.request_id AND a.ctid > b.ctid;
CREATE UNIQUE INDEX usage_request ON usage(request_id);
