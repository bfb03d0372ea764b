-- How many commits rewrote what a read of `events` could see (core/src/store/change_mark.rs):
-- every commit but one that only appended independent events (notes, channel messages,
-- reactions) adds one, in its own transaction. A reader that reads this row and the last
-- `seq` in one transaction knows, by comparing with a later read, whether only rows
-- after that `seq` are new: then a set it kept can be brought up to date by reading
-- those rows alone. SQLite only: there `seq` grows in commit order (one writer); on
-- PostgreSQL concurrent writers commit their sequence numbers out of order.
CREATE TABLE event_rewrites (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    count BIGINT NOT NULL
);
INSERT INTO event_rewrites (id, count) VALUES (1, 0);
