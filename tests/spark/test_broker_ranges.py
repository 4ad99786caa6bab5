"""The per-broker shuffle's partitions, cut by the driver (`spark.volume_history.BrokerRanges`):
brokers whole and in (cluster, broker) order across partitions, as many brokers in each as can be,
so the part files concatenate in broker order."""

from __future__ import annotations

from spark.volume_history import BrokerRanges


def partitions_of(spark, ranges: BrokerRanges, keys: list[tuple[int, int]]) -> list[int]:
    frame = spark.createDataFrame(keys, "cluster_index int, broker_id long")
    return [row[0] for row in frame.select(ranges.partition()).collect()]


def test_brokers_are_cut_into_even_ranges_in_key_order(spark):
    brokers = [(0, 1), (0, 2), (0, 7), (0, 1000), (1, 0), (1, 5)]
    ranges = BrokerRanges.even(brokers, 3)
    assert ranges.partitions == 3
    assert partitions_of(spark, ranges, brokers) == [0, 0, 1, 1, 2, 2]


def test_a_broker_the_driver_did_not_see_lands_in_order(spark):
    ranges = BrokerRanges.even([(0, 10), (0, 20), (0, 30), (1, 10)], 4)
    unseen = [(0, -5), (0, 15), (0, 25), (0, 99), (1, 0), (1, 99), (2, 0)]
    assert partitions_of(spark, ranges, unseen) == [0, 1, 2, 3, 3, 3, 3]


def test_fewer_brokers_than_partitions_leave_none_empty():
    assert BrokerRanges.even([(0, 3), (0, 4)], 16).partitions == 2
    assert BrokerRanges.even([], 16).partitions == 1
