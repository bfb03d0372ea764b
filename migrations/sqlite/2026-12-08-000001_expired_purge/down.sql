DROP INDEX events_expiring_by_author;
DROP INDEX events_expiring;
