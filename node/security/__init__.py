"""Security settings of Keel's processes: Kafka's ssl.*, sasl.* and listener properties read
into the wire's TLS and SASL settings."""
