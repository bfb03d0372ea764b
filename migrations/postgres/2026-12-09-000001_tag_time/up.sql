-- Reads flat at any size (issue 45): a tag read walks one value's rows newest first
-- (each tag row carries its event's `created_at`), NIP-77's set of community-wide rows
-- is read from `events_wide` alone (live rows only, every column the read names), and
-- an anonymous author read has an index of community-wide rows by author. The reasons
-- are written out in ../../sqlite/2026-12-09-000001_tag_time; keep the two in step.
ALTER TABLE event_tags ADD COLUMN created_at BIGINT NOT NULL DEFAULT 0;
UPDATE event_tags t SET created_at = e.created_at FROM events e WHERE e.seq = t.event_seq;
DROP INDEX event_tags_lookup;
CREATE INDEX event_tags_lookup ON event_tags (community_id, name, value, created_at DESC, event_seq);

DROP INDEX events_wide;
CREATE INDEX events_wide ON events (community_id, created_at DESC, id, expires_at, channel_id, deleted_at)
    WHERE channel_id IS NULL AND deleted_at IS NULL;
CREATE INDEX events_wide_by_author ON events (community_id, pubkey, created_at DESC, id)
    WHERE channel_id IS NULL;
