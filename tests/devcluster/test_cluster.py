"""DevCluster's lifecycle and arguments: ports, data dir, cluster id, idempotent stop."""

import socket

import pytest

from devcluster.cluster import DevCluster
from devcluster.validation import ControlError


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except ConnectionRefusedError:
        return False


def free_port_block(n):
    """n consecutive ports free right now (probed; retried on collision)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + n > 65535:
            continue
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports")


def test_start_listens_on_every_port_and_stop_closes_them(tmp_path):
    dc = DevCluster(brokers=3, log_dirs_per_broker=1, data_dir=tmp_path).start()
    try:
        ports = dc.broker_ports
        assert sorted(ports) == [0, 1, 2] and len(set(ports.values())) == 3
        assert dc.bootstrap == ",".join(f"127.0.0.1:{p}" for p in ports.values())
        assert dc.control_url.startswith("http://127.0.0.1:")
        assert all(listening(p) for p in ports.values())
    finally:
        dc.stop()
    assert not any(listening(p) for p in ports.values())
    dc.stop()  # idempotent


def test_a_base_port_gives_consecutive_ports(tmp_path):
    base = free_port_block(3)
    with DevCluster(brokers=3, log_dirs_per_broker=1, data_dir=tmp_path, base_port=base) as dc:
        assert dc.broker_ports == {0: base, 1: base + 1, 2: base + 2}


def test_log_dirs_are_real_directories_under_the_data_dir(tmp_path):
    with DevCluster(brokers=2, log_dirs_per_broker=3, data_dir=tmp_path / "d") as dc:
        assert dc.log_dir_path(1, 2) == tmp_path / "d" / "broker-1" / "logdir-2"
        assert all(
            (tmp_path / "d" / f"broker-{b}" / f"logdir-{i}").is_dir()
            for b in range(2)
            for i in range(3)
        )


def test_the_cluster_id_is_kept_in_the_data_dir(tmp_path):
    with DevCluster(brokers=1, log_dirs_per_broker=1, data_dir=tmp_path) as first:
        generated = first.cluster_id
    assert len(generated) == 22  # like Kafka's: a base64 UUID
    with DevCluster(brokers=1, log_dirs_per_broker=1, data_dir=tmp_path) as again:
        assert again.cluster_id == generated
    with pytest.raises(ValueError, match="does not match"):
        DevCluster(brokers=1, data_dir=tmp_path, cluster_id="other")
    with DevCluster(brokers=1, data_dir=tmp_path / "new", cluster_id="mine") as named:
        assert named.cluster_id == "mine"


def test_without_a_data_dir_a_temporary_one_is_removed_at_stop():
    with DevCluster(brokers=1, log_dirs_per_broker=1, control_port=None) as dc:
        data_dir = dc.data_dir
        assert data_dir.is_dir() and dc.control_url is None
    assert not data_dir.exists()


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"brokers": 0}, "brokers must be an integer >= 1"),
        ({"log_dirs_per_broker": 0}, "log_dirs_per_broker must be an integer >= 1"),
        ({"base_port": 65535, "brokers": 3}, "above 65535"),
        ({"control_port": 70000}, "control_port must be 0-65535"),
        ({"base_port": 20000, "control_port": 20001}, "is one of the broker ports"),
        ({"capacity_bytes": 0}, "capacity_bytes must be > 0"),
    ],
)
def test_bad_arguments_name_the_problem(tmp_path, kwargs, words):
    with pytest.raises(ValueError, match=words):
        DevCluster(data_dir=tmp_path, **kwargs)


def test_a_taken_port_fails_start_and_leaves_nothing_listening(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        dc = DevCluster(brokers=1, log_dirs_per_broker=1, data_dir=tmp_path, base_port=port)
        with pytest.raises(OSError, match=f"broker 0 cannot listen on 127.0.0.1:{port}"):
            dc.start()
    with pytest.raises(ControlError, match="not running"):
        dc.stop_broker(0)


def test_control_operations_check_their_arguments(devcluster):
    dc = devcluster(brokers=2, log_dirs_per_broker=1)
    with pytest.raises(ControlError, match="broker ids are 0-1"):
        dc.set_faults(5, latency_ms=1)
    with pytest.raises(TypeError, match="either a body mapping or keyword fields"):
        dc.set_log_dir(0, 0, {"clear": True}, fill_bytes=1)
