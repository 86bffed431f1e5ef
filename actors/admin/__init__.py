"""The admin rules: topic names, assignments and configs as Kafka's AdminZkClient checks
them, dynamic configs, the replication throttles' configs, and the partition limits."""
