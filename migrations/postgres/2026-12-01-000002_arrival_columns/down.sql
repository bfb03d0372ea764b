ALTER TABLE thread_metadata DROP COLUMN last_reply_received_at;
ALTER TABLE channels DROP COLUMN last_timeline_received_at;
