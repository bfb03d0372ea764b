-- The relay key this database belongs to (core/src/store/identity.rs): every process
-- serving one database must sign relay-authored events as one relay.
CREATE TABLE relay_identity (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pubkey TEXT NOT NULL
);
