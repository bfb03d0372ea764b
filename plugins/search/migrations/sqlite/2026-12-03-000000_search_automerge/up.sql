-- FTS5 merges a level's segments into one once `automerge` of them have piled up
-- (default 4). Live ingest commits small groups, so it writes many small segments, and
-- merging them four at a time rewrote each posting list about log4(N) times: the
-- largest part of the index's ingest cost. Sixteen at a time rewrites it half as often;
-- a search then reads a few more segments per level, still a handful of b-tree probes
-- for a rare word.
INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', 16);
