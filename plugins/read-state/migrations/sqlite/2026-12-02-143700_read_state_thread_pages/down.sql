DROP INDEX idx_read_state_thread_rows;
DROP INDEX idx_read_state_unread_threads;
ALTER TABLE read_state_frontiers DROP COLUMN thread_news_at;
ALTER TABLE read_state_frontiers DROP COLUMN thread_rank;
