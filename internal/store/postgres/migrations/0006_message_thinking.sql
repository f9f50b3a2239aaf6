-- An assistant message's thinking (issue 32): its blocks as JSON (text,
-- signature, redacted data, format, id), NULL when it had none. Adding a
-- nullable column without a default rewrites no rows.
ALTER TABLE messages ADD COLUMN thinking json;
