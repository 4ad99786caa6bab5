"""The JSON control API over HTTP, through ControlClient (and raw HTTP for malformed requests)."""

import json
import urllib.error
import urllib.request

import pytest

from devcluster.control_client import ControlClient, ControlClientError

pytestmark = pytest.mark.integration


@pytest.fixture
def dc(devcluster):
    # the host's disk: `clear` goes back to it
    return devcluster(brokers=2, log_dirs_per_broker=2, capacity_bytes=None)


@pytest.fixture
def cc(dc):
    return ControlClient(dc.control_url)


def raw(dc, method, path, data=None):
    request = urllib.request.Request(dc.control_url + path, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_state_shows_brokers_log_dirs_quotas_and_faults(dc, cc):
    state = cc.state()
    assert state["cluster_id"] == dc.cluster_id
    assert state["bootstrap"] == dc.bootstrap
    assert state["controller_id"] == 0
    assert [(b["id"], b["port"], b["up"]) for b in state["brokers"]] == [
        (0, dc.broker_ports[0], True),
        (1, dc.broker_ports[1], True),
    ]
    log_dir = state["brokers"][1]["log_dirs"][0]
    assert log_dir["path"] == str(dc.data_dir / "broker-1" / "logdir-0")
    assert log_dir["total_bytes"] > 0 and log_dir["usable_bytes"] >= 0
    assert log_dir["error"] is None
    assert state["quotas"] == [] and state["faults"] == {}


def test_log_dir_capacity_fill_pin_and_clear(dc, cc):
    out = cc.set_log_dir(0, 1, capacity_bytes=10_000_000, fill_bytes=4_000_000)
    assert (out["total_bytes"], out["usable_bytes"]) == (10_000_000, 6_000_000)
    assert sum(f.stat().st_size for f in dc.log_dir_path(0, 1).iterdir()) == 4_000_000
    assert cc.set_log_dir(0, 1, usable_bytes=42)["usable_bytes"] == 42
    assert cc.set_log_dir(0, 1, usable_bytes=None)["usable_bytes"] == 6_000_000
    cleared = cc.set_log_dir(0, 1, clear=True)
    assert cleared["capacity_bytes"] is None and cleared["pinned_usable_bytes"] is None
    assert list(dc.log_dir_path(0, 1).iterdir()) == []


def test_a_fill_past_a_virtual_disk_is_507_and_stops_at_its_capacity(dc, cc):
    cc.set_log_dir(1, 0, capacity_bytes=3_000_000, fill_bytes=1_000_000)
    with pytest.raises(ControlClientError) as full:
        cc.set_log_dir(1, 0, fill_bytes=500_000_000)  # not 500 MB onto the machine's disk
    assert full.value.status == 507
    assert "wrote 2000000 of 500000000 bytes" in full.value.message
    assert sum(f.stat().st_size for f in dc.log_dir_path(1, 0).iterdir()) == 3_000_000
    assert cc.broker(1)["log_dirs"][0]["usable_bytes"] == 0


def test_stop_and_start_a_broker(dc, cc):
    assert cc.stop_broker(1)["up"] is False
    state = cc.state()
    assert [b["up"] for b in state["brokers"]] == [True, False]
    assert cc.start_broker(1)["port"] == dc.broker_ports[1]
    assert [b["up"] for b in cc.state()["brokers"]] == [True, True]


def test_faults_are_listed_and_cleared(cc):
    active = cc.set_faults(1, latency_ms=5, log_dir_error={"index": 1, "code": 56})
    assert active == {"latency_ms": 5, "log_dir_errors": {"1": 56}}
    state = cc.state()
    assert state["faults"] == {"1": active}
    assert state["brokers"][1]["log_dirs"][1]["error"] == "KafkaStorageError"
    assert cc.clear_faults(1) == {}
    assert cc.state()["faults"] == {}


def test_requests_are_counted_by_broker_and_api_and_reset(dc, cc):
    from kafka.protocol.metadata import ApiVersionsRequest

    from devkit.devcluster_wire import exchange

    exchange(("127.0.0.1", dc.broker_ports[1]), [ApiVersionsRequest(version=0)] * 2)
    assert cc.requests() == {
        "by_broker": {"1": {"ApiVersions": 2}},
        "total": {"ApiVersions": 2},
    }
    assert cc.reset_requests() == {"by_broker": {}, "total": {}}


@pytest.mark.parametrize(
    "call, status, words",
    [
        (lambda cc: cc.stop_broker(7), 404, "broker ids are 0-1"),
        (lambda cc: cc.set_log_dir(0, 5, clear=True), 404, "indexes are 0-1"),
        (lambda cc: cc.set_log_dir(0, 0, capacity_bytes=-3), 400, "capacity_bytes"),
        (lambda cc: cc.set_log_dir(0, 0, size=3), 400, "unknown field(s) size"),
        (lambda cc: cc.set_faults(0, latency_ms="slow"), 400, "latency_ms must be an integer"),
        (lambda cc: cc.set_faults(0, max_describe_log_dirs_version=7), 400, "between 1 and 4"),
        (lambda cc: cc.set_faults(0, log_dir_error={"index": 9}), 400, "log_dir_error.index"),
        (lambda cc: cc.set_faults(0), 400, "empty request"),
    ],
)
def test_bad_requests_get_a_4xx_naming_the_problem(cc, call, status, words):
    with pytest.raises(ControlClientError) as caught:
        call(cc)
    assert caught.value.status == status
    assert words in caught.value.message


def test_malformed_http_requests(dc):
    assert raw(dc, "PUT", "/brokers/0/faults", b"{not json")[0] == 400
    assert raw(dc, "PUT", "/brokers/0/faults", b"[1, 2]")[0] == 400
    status, body = raw(dc, "GET", "/nowhere")
    assert status == 404 and "GET /state" in body["error"]
    assert raw(dc, "DELETE", "/state")[0] == 405


def test_unreachable_control_api_is_a_clear_error():
    with pytest.raises(ControlClientError, match="failed"):
        ControlClient("http://127.0.0.1:9", timeout=2).state()
