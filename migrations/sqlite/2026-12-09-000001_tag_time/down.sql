DROP INDEX events_wide_by_author;
DROP INDEX events_wide;
CREATE INDEX events_wide ON events (community_id, created_at DESC, id)
    WHERE channel_id IS NULL;
DROP INDEX event_tags_lookup;
CREATE INDEX event_tags_lookup ON event_tags (community_id, name, value, event_seq);
ALTER TABLE event_tags DROP COLUMN created_at;
