-- Paged thread rows (read_state plugin, PostgreSQL). Keep in step with
-- ../../sqlite/2026-12-02-143700_read_state_thread_pages.
--
-- A sidebar row lists a page of the followed threads with an unread reply, newest latest
-- reply first, by walking one index in that order and stopping after the page: its cost
-- no longer grows with how many threads someone made the reader follow. Each follower's
-- thread row carries what the walk needs, kept by ingest in the message's transaction
-- for every following row of the thread (one UPDATE per reply or deletion):
--   thread_rank    minus the author time of the thread's newest nondeleted reply
--                  (ascending rank = the sidebar's order; NULL: no reply)
--   thread_news_at arrival (microseconds) of the newest-arrived nondeleted reply (NULL:
--                  none, or only replies from before the arrival columns existed)
-- A row is in the walk's partial index while it is followed and has news past its
-- position; marks, cuts and the account start move positions past it.
ALTER TABLE read_state_frontiers ADD COLUMN thread_rank BIGINT;
ALTER TABLE read_state_frontiers ADD COLUMN thread_news_at BIGINT;

-- Rows from before: the same values ingest would have kept.
UPDATE read_state_frontiers SET
    thread_rank = -(SELECT r.last_reply_at FROM thread_metadata r
        WHERE r.community_id = read_state_frontiers.community_id
        AND r.event_id = read_state_frontiers.root_id),
    thread_news_at = (SELECT CASE WHEN r.last_reply_received_at IS NULL THEN NULL ELSE
        (SELECT MAX(e.received_at) FROM thread_metadata t JOIN events e
            ON e.community_id = t.community_id AND e.id = t.event_id
            WHERE t.community_id = r.community_id AND t.root_id = r.event_id
            AND e.deleted_at IS NULL) END
        FROM thread_metadata r
        WHERE r.community_id = read_state_frontiers.community_id
        AND r.event_id = read_state_frontiers.root_id)
WHERE root_id <> '';

-- Whole-channel cuts and account starts floor every thread position; written into the
-- positions (the same reads: every read takes the largest of the three), so rows they
-- read leave the walk's index.
UPDATE read_state_frontiers SET position = (SELECT c.cut FROM read_state_frontiers c
        WHERE c.community_id = read_state_frontiers.community_id
        AND c.pubkey = read_state_frontiers.pubkey
        AND c.channel_id = read_state_frontiers.channel_id AND c.root_id = '')
WHERE root_id <> '' AND position < (SELECT c.cut FROM read_state_frontiers c
        WHERE c.community_id = read_state_frontiers.community_id
        AND c.pubkey = read_state_frontiers.pubkey
        AND c.channel_id = read_state_frontiers.channel_id AND c.root_id = '');
UPDATE read_state_frontiers SET position = (SELECT a.started_at FROM read_state_accounts a
        WHERE a.community_id = read_state_frontiers.community_id
        AND a.pubkey = read_state_frontiers.pubkey)
WHERE position < (SELECT a.started_at FROM read_state_accounts a
        WHERE a.community_id = read_state_frontiers.community_id
        AND a.pubkey = read_state_frontiers.pubkey);

-- The sidebar's walk: one reader's followed threads with news in one channel, in
-- sidebar order (the cursor is a row comparison on the last two columns).
CREATE INDEX idx_read_state_unread_threads
    ON read_state_frontiers (community_id, pubkey, channel_id, thread_rank, root_id)
    WHERE following = TRUE AND thread_news_at > position;

-- Ingest's fan-out: every row of one thread (timeline rows are not in it).
CREATE INDEX idx_read_state_thread_rows ON read_state_frontiers (community_id, root_id)
    WHERE root_id <> '';
