"""`python -m bench.slowdown --runs N --episode-after`: each policy's runs after the first start
the enforcer with the journal the run before left, so that they show the episode after one on
the same load (request sizes recalled from the journal, enforcer/request_sizes.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import demo.slowdown
from demo.slowdown import carry_journal, parse, run_policies
from demo.stack import ENFORCER_JOURNAL
from enforcer.journal import Journal
from enforcer.quota_plan import PRODUCER_BYTE_RATE
from kvq.kafka.quota_entity import QuotaEntity

DAVE = (QuotaEntity.user("dave"), PRODUCER_BYTE_RATE)


def test_the_flag_needs_a_run_before(capsys):
    with pytest.raises(SystemExit) as refused:
        parse(["--episode-after"])
    assert refused.value.code == 2
    assert "--episode-after: needs --runs 2 or more (given 1)" in capsys.readouterr().err
    assert parse(["--runs", "2", "--episode-after"]).episode_after


def test_the_journal_a_run_left_is_the_next_ones_with_its_request_sizes(tmp_path):
    before, after = (
        tmp_path / "run-1" / "graceful-slowdown",
        tmp_path / "run-2" / "graceful-slowdown",
    )
    before.mkdir(parents=True)
    journal = Journal(before / ENFORCER_JOURNAL)
    journal.request_sizes.keep("demo", {DAVE: 49_152.0})
    journal.alerts.replace_group("{}:{}", {("demo", "f1"): 0.9})
    journal.close()
    carry_journal(before, after)
    carried = Journal(after / ENFORCER_JOURNAL)
    try:
        assert carried.request_sizes.sizes("demo") == {DAVE: 49_152.0}
        assert carried.alerts.group_state("{}:{}") == {}, "that run's Alertmanager is gone"
        assert carried.alerts.firing_factors("demo") == []
    finally:
        carried.close()


@dataclass
class FakeOutcome:
    """What run_policies keeps of a run (it sets `repeat`)."""

    repeat: tuple[int, int] = (1, 1)


@pytest.mark.parametrize(
    ("flags", "found"), [([], [False, False]), (["--episode-after"], [False, True])]
)
def test_each_run_after_the_first_starts_from_the_journal_the_one_before_left(
    tmp_path, monkeypatch, flags, found
):
    """Two runs of graceful-slowdown's; the first leaves a journal (the second's run stops the
    runs): with the flag, the second's work dir has it before its stack starts."""
    seen: list[bool] = []

    def run_policy(policy, work, *_args):
        journal = work / policy / ENFORCER_JOURNAL
        seen.append(journal.exists())
        journal.parent.mkdir(parents=True, exist_ok=True)
        Journal(journal).close()
        if len(seen) == 2:
            raise TimeoutError("the second run stops the runs")
        return FakeOutcome()

    monkeypatch.setattr(demo.slowdown, "run_policy", run_policy)
    args = parse(["--runs", "2", "--policy", "graceful-slowdown", "--work", str(tmp_path), *flags])
    assert run_policies(args) is None
    assert seen == found
