"""The closed-loop model of bench/slowdown's broker 0 (issue 42): Kafka's quotas, the producers
and retention, by tenths of a second (`kafka_load`), and the design study's policies run on it
(`study`). Not shipped: tests/kvq/model holds the shipped policy to it, `python -m
bench.policy_study` measures the variants it no longer runs, docs/policy-study.md tells the story.
"""
