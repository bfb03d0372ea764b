DROP TABLE read_state_mentions;
DROP TABLE read_state_frontiers;
DROP TABLE read_state_accounts;
