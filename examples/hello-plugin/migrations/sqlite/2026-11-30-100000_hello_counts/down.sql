DROP TABLE hello_counts;
