-- hello plugin: stored events per community and kind.
CREATE TABLE hello_counts (
    community_id BIGINT NOT NULL,
    kind BIGINT NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (community_id, kind)
);
