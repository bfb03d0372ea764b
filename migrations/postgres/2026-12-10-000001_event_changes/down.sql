DROP SEQUENCE event_changes;
