DROP TABLE search_backfill;
DROP TABLE search_artifacts;
DROP TABLE search_documents;
