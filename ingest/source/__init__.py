"""Sources: I/O that yields Kafka-shaped records (topic, partition, offset, timestamp, key, value)."""
