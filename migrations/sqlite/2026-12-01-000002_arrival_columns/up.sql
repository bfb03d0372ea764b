-- Newest arrival (events.received_at, microseconds) per read scope, kept at ingest in the
-- message's transaction (core/src/store/threads.rs). Read positions are compared
-- against these instead of walking messages: a channel whose last timeline
-- arrival is at or before a position is read with one comparison, and a thread whose last
-- reply arrival is at or before it is skipped without reading replies. NULL: nothing has
-- arrived since this migration (rows from before it are reached by no position).
-- Keep in step with ../../postgres/2026-12-01-000001_arrival_columns.
ALTER TABLE channels ADD COLUMN last_timeline_received_at BIGINT;
ALTER TABLE thread_metadata ADD COLUMN last_reply_received_at BIGINT;
