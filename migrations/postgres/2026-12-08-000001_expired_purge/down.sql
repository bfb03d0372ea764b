DROP INDEX events_expiring;
