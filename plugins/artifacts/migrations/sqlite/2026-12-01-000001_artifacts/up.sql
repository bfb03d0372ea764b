-- artifacts plugin (NIP-AR). One head per identity (community, d): the current accepted
-- revision. Every write advances it with a conditional UPDATE (compare-and-swap on
-- revision_id), so two edits naming the same prev can never both win.
CREATE TABLE artifact_heads (
    community_id BIGINT NOT NULL,
    d TEXT NOT NULL,
    artifact_type TEXT NOT NULL,
    revision_id TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    root_id TEXT,
    op TEXT NOT NULL,
    retired BOOLEAN NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (community_id, d)
);
CREATE INDEX artifact_heads_channel ON artifact_heads (community_id, channel_id);

-- Every accepted revision, numbered per identity in acceptance order (version).
CREATE TABLE artifact_revisions (
    community_id BIGINT NOT NULL,
    revision_id TEXT NOT NULL,
    d TEXT NOT NULL,
    version BIGINT NOT NULL,
    channel_id TEXT NOT NULL,
    op TEXT NOT NULL,
    redacted BOOLEAN NOT NULL,
    PRIMARY KEY (community_id, revision_id)
);
CREATE UNIQUE INDEX artifact_revisions_order ON artifact_revisions (community_id, d, version);

-- Tag name + first value of each listed (current, not deleted, not retired) artifact:
-- what current-state queries match. Older revisions never contribute.
CREATE TABLE artifact_current_tags (
    community_id BIGINT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    d TEXT NOT NULL,
    PRIMARY KEY (community_id, name, value, d)
);
CREATE INDEX artifact_current_tags_by_d ON artifact_current_tags (community_id, d);
