DROP TABLE event_rewrites;
