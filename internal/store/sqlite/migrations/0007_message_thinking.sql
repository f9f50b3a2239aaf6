-- An assistant message's thinking (issue 32): its blocks as JSON (text,
-- signature, redacted data, format, id), NULL when it had none. Added
-- with no default to fill: rows before it had no thinking.
ALTER TABLE messages ADD COLUMN thinking TEXT;
