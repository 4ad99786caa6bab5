"""kvq-enforcer: turn throttle alerts into Kafka client quotas and restore them exactly."""
