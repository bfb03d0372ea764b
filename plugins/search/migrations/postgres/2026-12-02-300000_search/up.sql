-- The search plugin's index. Derived data: rebuilt from `events` by the backfill.
--
-- One row per indexed event. The plugin tokenizes text itself (the same tokens on both
-- backends and for live matching) and writes the tsvector literally, so no text search
-- configuration rewrites a word (the `simple` behaviour: lower case, no stemming, no
-- stop words, any script).
CREATE TABLE search_documents (
    event_seq BIGINT PRIMARY KEY REFERENCES events(seq) ON DELETE CASCADE,
    tsv TSVECTOR NOT NULL
);
CREATE INDEX search_documents_tsv ON search_documents USING GIN (tsv);

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
