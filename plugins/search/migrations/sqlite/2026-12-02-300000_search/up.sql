-- The search plugin's index. Derived data: rebuilt from `events` by the backfill.
--
-- One FTS5 row per indexed event, rowid = events.seq. The plugin tokenizes text itself
-- (the same tokens on both backends and for live matching) and stores them joined by
-- spaces; the `ascii` tokenizer then splits exactly there. Contentless: no copy of the
-- text is kept; contentless_delete lets a removed event's row be deleted by rowid.
CREATE VIRTUAL TABLE search_fts USING fts5(
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'ascii'
);

-- The indexed (current) revision of each artifact, so a newer revision, a delete or a
-- redaction replaces or removes it.
CREATE TABLE search_artifacts (
    community_id BIGINT NOT NULL,
    d TEXT NOT NULL,
    event_seq BIGINT NOT NULL,
    PRIMARY KEY (community_id, d)
);

-- Backfill progress: events with seq <= indexed_through have been looked at.
CREATE TABLE search_backfill (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    indexed_through BIGINT NOT NULL,
    target BIGINT NOT NULL,
    documents BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
