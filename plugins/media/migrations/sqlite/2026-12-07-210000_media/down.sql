DROP TABLE media_owners;
DROP TABLE media_blobs;
