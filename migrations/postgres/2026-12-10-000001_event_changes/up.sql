-- The shared change mark (core/src/store/change_mark.rs): every relay process moves this
-- sequence after each commit of its writer, so a reader in any process can tell whether
-- a set it read earlier is still the set. A sequence, not a counter row: moving it takes
-- no row lock, so writers of different processes never wait on one another for it.
-- SQLite has no counterpart: there one process writes, and its counter is in memory.
CREATE SEQUENCE event_changes;
