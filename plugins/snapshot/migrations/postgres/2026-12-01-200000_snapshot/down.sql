DROP TABLE snapshot_records;
DROP TABLE snapshot_captures;
