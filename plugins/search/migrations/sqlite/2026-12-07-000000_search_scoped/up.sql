-- Issue 45: every token is indexed with its community and place (`scope.rs`), so that a
-- search walks only its reader's part of the index. Entries written before are in the
-- old form: they are dropped, and the backfill (which starts over when it has no
-- progress row) indexes every stored event again; older events are found again as it
-- proceeds.
INSERT INTO search_fts (search_fts) VALUES ('delete-all');
DELETE FROM search_artifacts;
DELETE FROM search_backfill;
