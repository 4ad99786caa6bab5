"""kvq-devcluster as a process: parseable lines, a working cluster, clean stop, clear errors."""

import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient

from devcluster.cli import control_port
from devcluster.control_client import ControlClient
from devkit.processes import start_dying_with_parent

pytestmark = pytest.mark.integration

SCRIPT = Path(sys.executable).with_name("kvq-devcluster")


def command(*args):
    return [str(SCRIPT), *args] if SCRIPT.exists() else [sys.executable, "-m", "devcluster", *args]


class Running:
    """The process and the values of its bootstrap=/control= lines, read until ``ready``."""

    def __init__(self, *args, timeout=60):
        self.proc = start_dying_with_parent(
            command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        reader = threading.Thread(target=self._read, daemon=True)
        reader.start()
        reader.join(timeout)
        if self.lines[-1:] != ["ready"]:
            self.stop()
            raise AssertionError(f"no ready line: {self.lines} {self.proc.stderr.read()}")
        values = dict(line.split("=", 1) for line in self.lines[:-1])
        self.bootstrap, self.control = values["bootstrap"], values["control"]

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.strip() == "ready":
                return

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def start(tmp_path):
    running = []

    def run(*args):
        process = Running("--data-dir", str(tmp_path / "data"), *args)
        running.append(process)
        return process

    yield run
    for process in running:
        process.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_prints_bootstrap_control_ready_serves_and_stops_on_signal(start, tmp_path, sig):
    dc = start(
        "--brokers",
        "3",
        "--log-dirs-per-broker",
        "2",
        "--base-port",
        "0",
        "--control-port",
        "0",
        "--capacity-bytes",
        "5000000",
        "--cluster-id",
        "test-id",
    )
    assert dc.lines[0].startswith("bootstrap=127.0.0.1:") and dc.lines[1].startswith("control=")
    state = ControlClient(dc.control).state()
    assert state["cluster_id"] == "test-id"
    assert [f"127.0.0.1:{b['port']}" for b in state["brokers"]] == dc.bootstrap.split(",")
    admin = KafkaAdminClient(bootstrap_servers=dc.bootstrap)
    try:
        assert len(admin.describe_cluster()["brokers"]) == 3
        dirs = admin.describe_log_dirs(topic_partitions={})
        assert [d["log_dir"] for d in dirs[2]["log_dirs"]] == [
            str(tmp_path / "data" / "broker-2" / f"logdir-{i}") for i in range(2)
        ]
        assert {d["total_bytes"] for b in dirs for d in b["log_dirs"]} == {5_000_000}
    finally:
        admin.close()
    assert dc.stop(sig) == 0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", state["brokers"][0]["port"]), timeout=2)


def test_a_quota_callback_class_is_reported_by_every_broker(start):
    plugin = "io.strimzi.kafka.quotas.StaticQuotaCallback"
    dc = start("--brokers", "2", "--base-port", "0", "--control-port", "0",
               "--client-quota-callback-class", plugin)  # fmt: skip
    state = ControlClient(dc.control).state()
    assert {b["config"]["client.quota.callback.class"] for b in state["brokers"]} == {plugin}


def test_a_taken_port_is_a_clear_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            command(
                "--data-dir",
                str(tmp_path),
                "--brokers",
                "1",
                "--base-port",
                str(port),
                "--control-port",
                "0",
            ),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    "args, words",
    [
        (["--brokers", "0"], "--brokers: must be >= 1"),
        (["--brokers", "many"], "must be a whole number"),
        (["--base-port", "70000"], "must be a port 0-65535"),
        (["--capacity-bytes", "-5"], "--capacity-bytes: must be >= 1"),
        (["--client-quota-callback-class", "a b"], "must be a Java class name"),
        ([], "--data-dir"),
    ],
)
def test_bad_arguments_exit_2_naming_the_problem(tmp_path, args, words):
    data_dir = [] if not args else ["--data-dir", str(tmp_path)]
    result = subprocess.run(command(*data_dir, *args), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert words in result.stderr and "Traceback" not in result.stderr


def test_help_teaches_the_flags_and_the_control_api():
    result = subprocess.run(command("--help"), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for words in (
        "--brokers",
        "--log-dirs-per-broker",
        "--capacity-bytes",
        "control API",
        "/brokers/0/log-dirs/1",
    ):
        assert words in result.stdout


@pytest.mark.parametrize(
    "asked, base_port, brokers, port",
    [
        (None, 19092, 3, 19100),
        (None, 19092, 10, 19102),  # the brokers take 19092-19101: the control API moves on
        (None, 19101, 2, 19100),
        (None, 0, 200, 19100),
        (0, 19092, 10, 0),
        (19100, 19092, 3, 19100),
    ],
)
def test_default_control_port_steps_aside_for_the_brokers(asked, base_port, brokers, port):
    assert control_port(asked, base_port, brokers) == port


def test_a_control_port_given_among_the_broker_ports_is_an_error(tmp_path):
    args = ["--data-dir", str(tmp_path), "--brokers", "10", "--control-port", "19100"]
    result = subprocess.run(command(*args), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "control port 19100 is one of the broker ports 19092-19101" in result.stderr


def test_a_bad_cluster_acls_file_exits_2_naming_it(tmp_path):
    acls = tmp_path / "acls.json"
    acls.write_text('{"User:kvq": ["Read"]}')
    result = subprocess.run(
        command("--data-dir", str(tmp_path), "--cluster-acls", str(acls)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"cluster ACLs file {acls}: unknown cluster operation(s) Read" in result.stderr


def test_sasl_users_file_opens_a_sasl_listener_printed_before_ready(start, tmp_path):
    users = tmp_path / "users.json"
    users.write_text('{"alice": "alice-secret"}')
    dc = start(
        "--brokers", "2", "--base-port", "0", "--control-port", "0", "--sasl-users", str(users)
    )
    values = dict(line.split("=", 1) for line in dc.lines[:-1])
    assert len(values["sasl_bootstrap"].split(",")) == 2
    assert values["sasl_bootstrap"] != values["bootstrap"]
    assert ControlClient(dc.control).sasl_users() == ["alice"]
    assert "alice-secret" not in "".join(dc.lines)


@pytest.mark.parametrize(
    "content, words",
    [("[1, 2]", "expected a JSON object"), ("{", "SASL users file"), ('{"a": ""}', "non-empty")],
)
def test_a_bad_sasl_users_file_exits_2_naming_it(tmp_path, content, words):
    users = tmp_path / "users.json"
    users.write_text(content)
    args = ["--data-dir", str(tmp_path / "d"), "--base-port", "0", "--sasl-users", str(users)]
    result = subprocess.run(command(*args), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert words in result.stderr and str(users) in result.stderr
