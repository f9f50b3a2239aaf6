-- What a request's upstream attempts that did not give the answer cost
-- (a hedge that lost, an attempt abandoned at its first-token timeout, one
-- that failed after the upstream took it), apart from the answer's own
-- input_tokens, output_tokens and cost. Older rows metered none.
ALTER TABLE usage ADD COLUMN attempts_input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN attempts_output_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN attempts_cost double precision NOT NULL DEFAULT 0;
