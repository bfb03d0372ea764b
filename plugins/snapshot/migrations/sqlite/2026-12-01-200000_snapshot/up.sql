-- NIP-AR stable manifest captures kept in the relay's database (the embedded store,
-- used when no Redis is configured). One row per capture or registration lease, and
-- the capture's records: the same names and values the Redis store keeps in its hash.
CREATE TABLE snapshot_captures (
    id TEXT PRIMARY KEY,
    community_id BIGINT NOT NULL,
    reader TEXT NOT NULL,
    -- 'lease' while the capture is being taken, 'ready' once registered.
    state TEXT NOT NULL,
    -- The lease's end, or the capture's fixed expiry (epoch milliseconds).
    until_ms BIGINT NOT NULL,
    -- Bytes charged against the shared storage quota.
    bytes BIGINT NOT NULL,
    pages BIGINT NOT NULL,
    entries BIGINT NOT NULL,
    query TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX snapshot_captures_reader ON snapshot_captures (community_id, reader);
CREATE INDEX snapshot_captures_until ON snapshot_captures (until_ms);

CREATE TABLE snapshot_records (
    capture_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (capture_id, name)
);
