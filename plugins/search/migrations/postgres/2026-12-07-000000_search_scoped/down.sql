-- The older plugin reads unscoped lexemes: the scoped documents are dropped and its
-- backfill indexes every stored event again.
TRUNCATE search_documents;
DELETE FROM search_artifacts;
DELETE FROM search_backfill;
