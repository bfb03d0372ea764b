-- NIP-40: when an event expires (its `expiration` tag, unix seconds), NULL when it has
-- none. Every read skips rows whose time has come (core/src/store/query.rs), so an
-- expired event is never served though its row stays until deleted.
-- Keep in step with ../../sqlite/2026-12-02-000001_event_expiration.
ALTER TABLE events ADD COLUMN expires_at BIGINT;
-- Events stored before this migration: their tag index holds the tag's value.
UPDATE events SET expires_at = (
    SELECT CAST(t.value AS BIGINT) FROM event_tags t
    WHERE t.event_seq = events.seq AND t.name = 'expiration'
      AND t.value ~ '^[0-9]{1,18}$'
    ORDER BY t.position LIMIT 1
)
WHERE EXISTS (
    SELECT 1 FROM event_tags t WHERE t.event_seq = events.seq AND t.name = 'expiration'
);
