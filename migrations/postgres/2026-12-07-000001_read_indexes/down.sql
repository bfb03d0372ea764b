DROP INDEX events_wide;
DROP INDEX events_by_kind;
CREATE INDEX events_by_kind ON events (community_id, kind, created_at DESC);
DROP INDEX events_by_author;
CREATE INDEX events_by_author ON events (community_id, pubkey, created_at DESC);
