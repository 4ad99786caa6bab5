"""`python -m bench.slowdown`: a run that crossed the limit says why. Its logs are kept (not only
with --work), and its table tells what the loop did besides its steps (LoopHealth)."""

from __future__ import annotations

from types import SimpleNamespace

from demo.slowdown import FULL, SETUP, LoopHealth, keep_if_telling, log_signs


def outcome(policy: str, lowest: int):
    watch = SimpleNamespace(samples=[], lowest=lambda: (lowest, FULL))
    return SimpleNamespace(policy=policy, run=SimpleNamespace(watch=watch, limit=SETUP.limit))


def test_a_temp_work_dir_is_removed_when_every_run_stayed_above_the_limit(tmp_path, capsys):
    work = tmp_path / "work"
    (work / "graceful-slowdown").mkdir(parents=True)
    keep_if_telling(work, [outcome("graceful-slowdown", SETUP.limit + 1)], runs=1)
    assert not work.exists()
    assert capsys.readouterr().err == ""


def test_the_logs_of_a_run_that_crossed_the_limit_are_kept_and_named(tmp_path, capsys):
    work = tmp_path / "work"
    (work / "graceful-slowdown").mkdir(parents=True)
    runs = [outcome("stop-on-violation", SETUP.limit + 1), outcome("graceful-slowdown", 0)]
    keep_if_telling(work, runs, runs=2)
    assert (work / "graceful-slowdown").is_dir()
    assert f"graceful-slowdown crossed the limit: the runs' logs are kept in {work}" in (
        capsys.readouterr().err
    )


def test_the_logs_of_a_run_that_did_not_complete_are_kept(tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    keep_if_telling(work, [outcome("stop-on-violation", SETUP.limit + 1)], runs=2)
    assert work.is_dir()
    assert "a run did not complete" in capsys.readouterr().err


def test_the_signs_of_a_throttle_that_binds_nothing_are_counted_in_the_enforcers_log(tmp_path):
    log = tmp_path / "enforcer.log"
    log.write_text(
        'level=warn msg="cluster demo: no observed produce rates (...); throttling from the '
        'originals"\nlevel=info msg="cluster demo: factor 0.5 applied"\n'
        'level=warning msg="cluster demo: fail-safe: factor 0.4 from prometheus"\n'
        'level=warning msg="cluster demo: fail-safe: factor 0.3 from prometheus"\n'
    )
    assert log_signs(log) == {
        "throttling from the originals": 1,
        "fail-safe: factor": 2,
        "reference(s) from before a rise": 0,
    }
    assert log_signs(tmp_path / "missing.log") == dict.fromkeys(log_signs(log), 0)


def test_the_health_row_names_what_weakened_the_throttle():
    health = LoopHealth(
        fallback_seconds=12.0,
        failsafe_seconds=0.0,
        lowest_factor=0.125,
        rates_missing_seconds=31.0,
        webhooks={"applied": 40, "heartbeat": 9, "refused": 0},
        signs={"throttling from the originals": 2, "fail-safe: factor": 0},
    )
    row = health.row()
    assert "lowest factor 0.125" in row
    assert "exporter on its fallback 12 s" in row
    assert "brokers' rate series missing 31 s" in row
    assert "webhooks: 40 applied, 9 heartbeat" in row and "refused" not in row
    assert "log: 2 episodes begun without observed rates" in row
    assert "fail-safe applies" not in row
