-- Every read shape has an index that matches it (issue 45), so none is answered by a walk of
-- a whole community's time index filtered row by row:
-- community-wide rows (no channel: what an anonymous reader reads, NIP-77's set of them)
-- have their own time index, and the kind and author indexes end with `id`, the answer
-- order's tie-break, so one kind or author reads in answer order and stops at the limit.
-- Keep in step with ../../sqlite/2026-12-07-000001_read_indexes.
CREATE INDEX events_wide ON events (community_id, created_at DESC, id)
    WHERE channel_id IS NULL;
DROP INDEX events_by_kind;
CREATE INDEX events_by_kind ON events (community_id, kind, created_at DESC, id);
DROP INDEX events_by_author;
CREATE INDEX events_by_author ON events (community_id, pubkey, created_at DESC, id);
