"""Kafka client settings (librdkafka and kafka-python) and the one kafka-python session."""
