ALTER TABLE events DROP COLUMN expires_at;
