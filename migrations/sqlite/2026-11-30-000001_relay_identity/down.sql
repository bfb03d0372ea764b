DROP TABLE relay_identity;
