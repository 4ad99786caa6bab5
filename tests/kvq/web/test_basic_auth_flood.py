"""A crowd sending wrong basic-auth passwords cannot blind Prometheus: a remembered password is
answered at once, the bcrypt work the crowd can queue is bounded, and checks for clients that
left are dropped. Real server, real bcrypt, real sockets from many loopback addresses."""

from __future__ import annotations

import bcrypt
import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from devkit.processes import wait_until
from devkit.web_clients import WrongPasswordCrowd, basic_auth
from kvq.web.server import Response, Route, WebServer
from kvq.web.standard_metrics import register_standard_metrics
from kvq.web.web_config import load_web_config

PASSWORD = "scrape-secret"


@pytest.fixture(params=[10, 12], ids=["cost10", "cost12"])
def server(request, tmp_path):
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=request.param)).decode()
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n")
    registry = CollectorRegistry()
    metrics = Route("/metrics", lambda _r: Response(200, generate_latest(registry)), "metrics")
    server = WebServer("test", "", ("127.0.0.1", 0), [metrics], load_web_config(path))
    register_standard_metrics(registry, "test", server)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def scrape(server: WebServer) -> requests.Response:
    return requests.get(server.url + "/metrics", auth=("prometheus", PASSWORD), timeout=60)


def dropped(server: WebServer, reason: str) -> float:
    """kafka_volume_quota_http_connections_dropped_total{reason}, as Prometheus reads it."""
    response = scrape(server)
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name.endswith("_dropped_total") and sample.labels["reason"] == reason:
                return sample.value
    raise AssertionError(f"no dropped_total sample for reason {reason}")


def test_a_remembered_password_is_answered_while_the_crowds_checks_wait(server):
    bound = server.limits.max_pending_auth_checks
    assert scrape(server).status_code == 200  # checked once with bcrypt, remembered from now on
    with WrongPasswordCrowd(server.bound, size=50, addresses=25) as crowd:
        wait_until(lambda: 401 in crowd.answers, what="the first wrong password checked")
        for _ in range(3):
            assert scrape(server).status_code == 200
            # still waiting: checks admitted before this scrape (first-come-first-served would
            # have run all of them before it)
            assert crowd.waiting > 0
    assert server.auth_checks.most_pending == bound


@pytest.mark.parametrize("server", [10], indirect=True, ids=["cost10"])  # checks every request
def test_the_crowd_beyond_the_bound_is_refused_without_a_check(server):
    bound = server.limits.max_pending_auth_checks
    with WrongPasswordCrowd(server.bound, size=50, addresses=25) as crowd:
        wait_until(lambda: crowd.waiting == 0, timeout=120, what="every request answered")
    refused = [i for i, status in enumerate(crowd.answers) if status == 429]
    checked = [i for i, status in enumerate(crowd.answers) if status == 401]
    # a check that ends while the crowd is still connecting makes room for one more
    assert len(checked) + len(refused) == 50 and len(refused) >= 50 // 2
    assert max(refused) < max(checked)  # a refusal does not wait for the checks
    assert server.auth_checks.most_pending == bound
    assert server.auth_checks.ran == len(checked)  # a refusal costs no check
    assert dropped(server, "auth_queue_full") == len(refused)


def test_one_address_holds_at_most_its_share_of_the_queue(server):
    per_address = server.limits.max_auth_checks_per_address
    with WrongPasswordCrowd(server.bound, size=10, addresses=1) as crowd:
        wait_until(lambda: crowd.waiting == 0, timeout=120, what="every request answered")
    assert crowd.answers.count(401) + crowd.answers.count(429) == 10
    assert crowd.answers.count(429) >= 10 - 2 * per_address
    assert server.auth_checks.most_pending == per_address


def test_checks_of_clients_that_left_are_dropped_before_they_run(server):
    bound = server.limits.max_pending_auth_checks
    checks = server.auth_checks
    crowd = WrongPasswordCrowd(server.bound, size=bound, addresses=bound)
    try:
        # every request in the queue, or checked already (on a loaded machine a check may end
        # before the last client has connected)
        wait_until(lambda: checks.pending + checks.ran == bound, 60, what="every request queued")
        ran_before = checks.ran
    finally:
        crowd.close()  # every client gives up while at most one check is running
    wait_until(lambda: checks.pending == 0, timeout=60, what="the queue drained")
    # the running check cannot be stopped; one more may have started as the clients left
    assert checks.ran <= ran_before + 2
    # every check that did not run is dropped, and so is the answer of the one running when its
    # client left
    assert dropped(server, "auth_client_gone") in (bound - checks.ran, bound - checks.ran + 1)


def test_a_new_right_password_takes_its_turn_before_one_addresss_backlog(server):
    with WrongPasswordCrowd(server.bound, size=10, addresses=1, again=True) as crowd:
        wait_until(lambda: crowd.answers.count(429) >= 3, what="that address at its share")
        assert scrape(server).status_code == 200  # not remembered yet: a check of its own
        assert crowd.waiting > 0


@pytest.mark.parametrize("server", [10], indirect=True, ids=["cost10"])  # checks every request
def test_unknown_users_cost_a_check_like_known_ones(server):
    """No telling users apart by the answer or its time: an unknown user's password is checked
    against a configured hash too (same bound), and a repeated wrong one of either kind is
    answered from memory."""
    with WrongPasswordCrowd(server.bound, size=4, addresses=4, user="nobody") as crowd:
        wait_until(lambda: crowd.waiting == 0, timeout=120, what="every request answered")
    assert crowd.answers == [401] * 4
    assert server.auth_checks.ran == 4
    for user in ("nobody", "prometheus", "nobody", "prometheus"):
        header = {"Authorization": basic_auth(user, "guess")}
        response = requests.get(server.url + "/metrics", headers=header, timeout=60)
        assert response.status_code == 401
    assert server.auth_checks.ran == 4 + 2
