-- Reads flat at any size (issue 45): three shapes still cost more as a community grew.
--
-- 1. A tag read (`{"#t":[x],"limit":20}`) collected every event carrying the value and
--    sorted them to answer the newest 20: 2,500 rows for a topic at a million events.
--    Each tag row now carries its event's `created_at`, and the tag index is ordered by
--    it, so the read walks one value's rows newest first and stops at the limit.
-- 2. NIP-77's set of community-wide rows (an anonymous `NEG-OPEN {}`) read every row's
--    table page to check `deleted_at` and `expires_at`. `events_wide` now holds live
--    rows only and every column that read names, so it is answered from the index alone
--    (SQLite counts an index as covering only if it holds every column the statement
--    names, even those its WHERE fixes, hence `channel_id` and `deleted_at`).
-- 3. An anonymous author read walked the author's channel messages to find its few
--    community-wide notes: `events_wide_by_author` holds only those.
--
-- Keep in step with ../../postgres/2026-12-09-000001_tag_time.
ALTER TABLE event_tags ADD COLUMN created_at BIGINT NOT NULL DEFAULT 0;
UPDATE event_tags SET created_at = (SELECT e.created_at FROM events e WHERE e.seq = event_tags.event_seq);
DROP INDEX event_tags_lookup;
CREATE INDEX event_tags_lookup ON event_tags (community_id, name, value, created_at DESC, event_seq);

DROP INDEX events_wide;
CREATE INDEX events_wide ON events (community_id, created_at DESC, id, expires_at, channel_id, deleted_at)
    WHERE channel_id IS NULL AND deleted_at IS NULL;
CREATE INDEX events_wide_by_author ON events (community_id, pubkey, created_at DESC, id)
    WHERE channel_id IS NULL;
