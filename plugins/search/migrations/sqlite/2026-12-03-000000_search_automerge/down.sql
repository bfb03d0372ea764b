INSERT INTO search_fts (search_fts, rank) VALUES ('automerge', 4);
