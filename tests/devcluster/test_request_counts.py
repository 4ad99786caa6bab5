"""RequestCounter: the JSON of GET /requests."""

import threading

from devcluster.request_counts import RequestCounter


def test_counts_by_broker_and_in_total_then_resets():
    counter = RequestCounter()
    for broker_id, api in [(0, "AlterClientQuotas"), (2, "ApiVersions"), (0, "AlterClientQuotas")]:
        counter.count(broker_id, api)
    assert counter.snapshot() == {
        "by_broker": {"0": {"AlterClientQuotas": 2}, "2": {"ApiVersions": 1}},
        "total": {"AlterClientQuotas": 2, "ApiVersions": 1},
    }
    counter.reset()
    assert counter.snapshot() == {"by_broker": {}, "total": {}}


def test_counting_from_many_threads_loses_nothing():
    counter = RequestCounter()

    def work():
        for _ in range(1000):
            counter.count(1, "Metadata")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.snapshot()["total"] == {"Metadata": 8000}
