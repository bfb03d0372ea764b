DROP TABLE media_refs;
DROP TABLE media_owners;
DROP TABLE media_blobs;
