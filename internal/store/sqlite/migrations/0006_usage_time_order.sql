-- Usage rows arrive in time order but carry random request IDs: a unique
-- index on the ID alone put every row of a batch on a page of its own
-- (two page writes a row, WAL and checkpoint). A row's time is fixed when
-- the request is metered and travels with every retry and spill replay,
-- so (created_at, request_id) still makes a retried batch insert nothing
-- twice, and its pages fill in order. It also serves the time range
-- queries usage_time served.
DROP INDEX usage_request;
DROP INDEX usage_time;
CREATE UNIQUE INDEX usage_time_request ON usage(created_at, request_id);
