DROP TABLE community_sanctions;
DROP TABLE community_members;
DROP TABLE thread_metadata;
DROP TABLE channel_members;
DROP TABLE channels;
DROP TABLE event_tags;
DROP TABLE events;
DROP TABLE communities;
