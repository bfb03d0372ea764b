DROP TABLE artifact_current_tags;
DROP TABLE artifact_revisions;
DROP TABLE artifact_heads;
