-- media plugin tables (PostgreSQL). Keep in step with ../../sqlite/2026-12-07-210000_media.
-- A blob is its bytes in one community: the same sha256 in two communities is two rows
-- (and two stored files). `channel` and `uploader` are the first upload's; who may read
-- is decided from every owner's row (media_owners). `channel` = '' when unbound.
CREATE TABLE media_blobs (
    community_id BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    size BIGINT NOT NULL,
    mime TEXT NOT NULL,
    channel TEXT NOT NULL DEFAULT '',
    uploader TEXT NOT NULL,
    uploaded_at BIGINT NOT NULL,
    PRIMARY KEY (community_id, sha256)
);

-- One row per member who uploaded the blob: each counts it against their quota, lists
-- it, and removes only their own row with DELETE; the blob goes with its last owner.
-- `channel` ('' = unbound) is what this owner's upload bound the blob to.
CREATE TABLE media_owners (
    community_id BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    pubkey TEXT NOT NULL,
    channel TEXT NOT NULL DEFAULT '',
    uploaded_at BIGINT NOT NULL,
    PRIMARY KEY (community_id, sha256, pubkey),
    FOREIGN KEY (community_id, sha256) REFERENCES media_blobs (community_id, sha256)
);

-- /list/<pubkey>, newest first, and a pubkey's quota sum.
CREATE INDEX media_owners_by_pubkey ON media_owners (community_id, pubkey, uploaded_at, sha256);

-- Blobs stored events name (an imeta tag's x or url, a URL in content), kept with the
-- event's transaction; garbage collection deletes blobs no live event names once
-- orphan_grace_secs have passed since their last upload.
CREATE TABLE media_refs (
    community_id BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    event_seq BIGINT NOT NULL,
    PRIMARY KEY (community_id, sha256, event_seq)
);
CREATE INDEX media_refs_by_event ON media_refs (event_seq);
