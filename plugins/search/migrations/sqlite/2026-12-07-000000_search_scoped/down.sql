-- The older plugin reads unscoped tokens: the scoped entries are dropped and its
-- backfill indexes every stored event again.
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
DELETE FROM search_artifacts;
DELETE FROM search_backfill;
