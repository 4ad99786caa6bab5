"""`kvq-enforcer` command line: clear refusals before serving, --help that teaches."""

from __future__ import annotations

import random

import pytest

from enforcer.cli import build_parser, flag_overrides, main
from enforcer.journal import Journal
from enforcer.server_config import policy_of
from enforcer.settings import EnforcerSettings


def write_config(tmp_path, name="c1", **extra):
    props = {
        "kvq.cluster.name": name,
        "client.quota.callback.static.kafka.admin.bootstrap.servers": "127.0.0.1:1",
        "client.quota.callback.static.storage.per.volume.limit.min.available.ratio": "0.05",
        **extra,
    }
    path = tmp_path / f"{name}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def run(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr().err


def test_refuses_to_start_without_credentials(tmp_path, capsys):
    code, err = run(["--config", write_config(tmp_path)], capsys)
    assert code == 2
    assert "kvq.enforcer.auth.bearer.token.file" in err and "--insecure-no-auth" in err


def test_unreadable_token_file_is_named(tmp_path, capsys):
    config = write_config(
        tmp_path, **{"kvq.enforcer.auth.bearer.token.file": str(tmp_path / "missing")}
    )
    code, err = run(["--config", config], capsys)
    assert code == 2 and "missing: cannot read" in err


def test_config_errors_are_all_printed(tmp_path, capsys):
    config = write_config(tmp_path, **{"kvq.enforcer.dry.run": "perhaps", "kvq.enforcer.nope": "1"})
    code, err = run(["--config", config], capsys)
    assert code == 2
    assert "kvq.enforcer.dry.run=perhaps: must be true or false" in err
    assert "kvq.enforcer.nope is not a known setting" in err


def test_cluster_names_must_differ_between_configs(tmp_path, capsys):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    a = write_config(tmp_path / "a", "same")
    b = write_config(tmp_path / "b", "same")
    code, err = run(["--config", a, "--config", b, "--insecure-no-auth"], capsys)
    assert code == 2 and "repeated: ['same']" in err


def test_unknown_quota_key_is_refused(tmp_path, capsys):
    config = write_config(tmp_path, **{"kvq.enforcer.quota.keys": "producer_byte_rate,speed"})
    code, err = run(["--config", config, "--insecure-no-auth"], capsys)
    assert code == 2 and "speed" in err and "consumer_byte_rate" in err


def test_observed_rate_references_need_prometheus_and_a_known_reference(tmp_path, capsys):
    config = write_config(tmp_path, **{"kvq.enforcer.throttle.reference": "observed-rate"})
    code, err = run(["--config", config, "--insecure-no-auth", "--check-config"], capsys)
    assert code == 2 and "observed-rate" in err and "kvq.enforcer.prometheus.url" in err
    assert len(err.strip().splitlines()) == 1
    config = write_config(tmp_path, **{"kvq.enforcer.throttle.reference": "guess"})
    code, err = run(["--config", config, "--insecure-no-auth"], capsys)
    assert code == 2 and "guess" in err and "base, observed-rate" in err


def test_the_burst_ratio_reaches_the_plan_and_is_refused_outside_its_range(tmp_path, capsys):
    config = write_config(tmp_path)
    assert policy_of(EnforcerSettings.load(config, {})).burst_ratio == 1.0
    config = write_config(tmp_path, **{"kvq.enforcer.throttle.observed.rate.burst.ratio": "2"})
    assert policy_of(EnforcerSettings.load(config, {})).burst_ratio == 2.0
    for bad in ("0.8", "11", "often"):
        config = write_config(tmp_path, **{"kvq.enforcer.throttle.observed.rate.burst.ratio": bad})
        code, err = run(["--config", config, "--insecure-no-auth", "--check-config"], capsys)
        assert code == 2 and "burst.ratio" in err and bad in err and "from 1 to 10" in err
        assert "Traceback" not in err


def test_flags_override_settings_and_map_the_base_quotas(tmp_path):
    args = build_parser().parse_args(
        ["--config", "x", "--listen", "127.0.0.1:1234", "--dry-run", "--journal", "j.db"]
    )
    overrides = flag_overrides(args)
    settings = EnforcerSettings.load(
        write_config(
            tmp_path,
            **{
                "client.quota.callback.static.produce": "1000",
                "client.quota.callback.static.fetch": "2000",
                "client.quota.callback.static.excluded.principal.name.list": "User:CN=a,O=b",
                "kvq.enforcer.quota.keys": "consumer_byte_rate",
            },
        ),
        overrides,
    )
    assert settings.listen == ("127.0.0.1", 1234)
    assert settings.dry_run is True
    assert settings.journal == "j.db"
    policy = policy_of(settings)
    assert policy.keys == ("producer_byte_rate", "consumer_byte_rate")
    assert policy.bases["producer_byte_rate"] == 1000 and policy.bases["consumer_byte_rate"] == 2000
    assert policy.excluded_users == frozenset({"CN=a,O=b"})


def test_help_shows_a_config_and_an_alertmanager_receiver(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for text in ("--config FILE", "--dry-run", "credentials_file", "throttle_factor", "--listen"):
        assert text in out


def test_a_journal_with_garbage_pages_is_a_clear_error(tmp_path, capsys):
    journal = tmp_path / "journal.sqlite3"
    Journal(journal).close()
    data = bytearray(journal.read_bytes())
    data[4096:] = random.Random(1).randbytes(len(data) - 4096)  # every page after the schema
    journal.write_bytes(bytes(data))
    config = write_config(tmp_path, **{"kvq.enforcer.journal": str(journal)})
    code, err = run(["--config", config, "--insecure-no-auth"], capsys)
    assert code == 2
    assert f"kvq.enforcer.journal={journal} is corrupt" in err and "move it away" in err


def test_an_unparseable_jaas_line_is_a_config_error(tmp_path, capsys):
    jaas = "client.quota.callback.static.kafka.admin.sasl.jaas.config"
    config = write_config(tmp_path, **{jaas: "GssapiLoginModule required;"})
    code, err = run(["--config", config, "--insecure-no-auth"], capsys)
    assert code == 2 and "kafka.admin.sasl.jaas.config: only PlainLoginModule" in err


def test_a_listen_host_that_does_not_resolve_is_a_clear_error(tmp_path, capsys):
    config = write_config(
        tmp_path,
        **{
            "kvq.enforcer.listen": "nosuch.invalid:9899",
            "kvq.enforcer.journal": str(tmp_path / "j.sqlite3"),
        },
    )
    code, err = run(["--config", config, "--insecure-no-auth"], capsys)
    assert code == 2 and "cannot listen on nosuch.invalid:9899" in err


def test_threads_must_be_at_least_one(tmp_path, capsys):
    code, err = run(["--config", write_config(tmp_path), "--threads", "0"], capsys)
    assert code == 2 and "--threads" in err


def test_check_config_prints_every_file_with_secrets_masked(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the default journal would be created
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    auth = {"kvq.enforcer.auth.bearer.token.file": token}  # server-wide: alike in both files
    first = write_config(tmp_path / "a", "eu-1", **auth)
    second = write_config(tmp_path / "b", "us-1", **auth)
    assert main(["--config", first, "--config", second, "--check-config"]) == 0
    out = capsys.readouterr().out
    assert "kvq.cluster.name=eu-1" in out and "kvq.cluster.name=us-1" in out
    assert "kvq.enforcer.auth.bearer.token.file=********" in out
    assert "kvq.enforcer.journal=kvq-enforcer-journal.sqlite3" in out
    assert "s3cret-token" not in out
    assert not (tmp_path / "kvq-enforcer-journal.sqlite3").exists()


def test_check_config_fails_for_what_start_up_fails_on(tmp_path, capsys):
    token = tmp_path / "token"
    token.write_bytes(b"caf\xe9\n")
    config = write_config(tmp_path, **{"kvq.enforcer.auth.bearer.token.file": token})
    code, err = run(["--config", config, "--check-config"], capsys)
    assert code == 2 and "cannot read: not UTF-8" in err


def test_files_that_disagree_on_a_server_wide_setting_are_refused_naming_both(tmp_path, capsys):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    a = write_config(tmp_path / "a", "eu-1", **{"kvq.enforcer.journal": tmp_path / "a.sqlite3"})
    b = write_config(tmp_path / "b", "us-1", **{"kvq.enforcer.journal": tmp_path / "b.sqlite3"})
    argv = ["--config", a, "--config", b, "--insecure-no-auth", "--check-config"]
    code, err = run(argv, capsys)
    assert code == 2
    assert err.startswith(f"kvq-enforcer: kvq.enforcer.journal differs between {a} (")
    assert f"a.sqlite3) and {b} (kvq.enforcer.journal=" in err and "--journal" in err
    # a flag sets it for every cluster: nothing left to disagree on
    assert main([*argv, "--journal", str(tmp_path / "one.sqlite3")]) == 0
    capsys.readouterr()
    c = write_config(tmp_path / "b", "ap-1", **{"kvq.enforcer.listen": "127.0.0.1:9999"})
    code, err = run(["--config", a, "--config", c, "--insecure-no-auth", "--check-config"], capsys)
    assert code == 2 and "kvq.enforcer.listen differs" in err and "unset: the default" in err


def test_files_that_disagree_on_the_stale_window_are_refused(tmp_path, capsys):
    """One server judges every alert's staleness against one window (the alert episodes share
    one journal): files that give two are refused, one written as the default is not."""
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    a = write_config(tmp_path / "a", "eu-1", **{"kvq.enforcer.stale.window": "PT1M"})
    b = write_config(tmp_path / "b", "us-1")
    argv = ["--config", a, "--config", b, "--insecure-no-auth", "--check-config"]
    code, err = run([*argv, "--journal", str(tmp_path / "one.sqlite3")], capsys)
    assert code == 2
    assert err.startswith(f"kvq-enforcer: kvq.enforcer.stale.window differs between {a} (")
    assert "kvq.enforcer.stale.window=PT1M) and " in err and "unset: the default" in err
    c = write_config(tmp_path / "b", "ap-1", **{"kvq.enforcer.stale.window": "PT2M"})
    argv = ["--config", c, "--config", b, "--insecure-no-auth", "--check-config"]
    assert main([*argv, "--journal", str(tmp_path / "one.sqlite3")]) == 0


def test_a_config_error_starts_with_the_program_name(tmp_path, capsys):
    config = write_config(tmp_path, **{"kvq.enforcer.dry.run": "perhaps"})
    code, err = run(["--config", config], capsys)
    assert code == 2 and err.startswith("kvq-enforcer: 1 configuration error(s) in ")


def test_files_that_disagree_on_the_cluster_label_are_refused(tmp_path, capsys):
    """One server matches every alert by one label (kvq.cluster.label, shared with the exporter
    that reads the same file): files that name two are refused, --cluster-label settles it."""
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
    a = write_config(tmp_path / "a", "eu-1", **{"kvq.cluster.label": "kafka_cluster"})
    b = write_config(tmp_path / "b", "us-1")
    argv = ["--config", a, "--config", b, "--insecure-no-auth", "--check-config"]
    argv += ["--journal", str(tmp_path / "one.sqlite3")]
    code, err = run(argv, capsys)
    assert code == 2
    assert err.startswith(f"kvq-enforcer: kvq.cluster.label differs between {a} (")
    assert "kvq.cluster.label=kafka_cluster) and " in err and "unset: the default" in err
    assert "--cluster-label" in err
    assert main([*argv, "--cluster-label", "kafka_cluster"]) == 0
    assert capsys.readouterr().out.count("kvq.cluster.label=kafka_cluster") == 2


def test_import_journal_needs_the_kafka_store_and_an_existing_file(tmp_path, capsys):
    local = write_config(tmp_path, "c1")
    code, err = run(["--config", local, "--insecure-no-auth", "--import-journal", "j"], capsys)
    assert code == 2
    assert "--import-journal needs kvq.enforcer.state.store=kafka (it is local)" in err
    (tmp_path / "k").mkdir()
    kafka = write_config(tmp_path / "k", "c1", **{"kvq.enforcer.state.store": "kafka"})
    missing = str(tmp_path / "missing.sqlite3")
    code, err = run(["--config", kafka, "--insecure-no-auth", "--import-journal", missing], capsys)
    assert code == 2 and f"--import-journal {missing}: no such file" in err


def test_an_unknown_state_store_names_what_is_allowed(tmp_path, capsys):
    config = write_config(tmp_path, **{"kvq.enforcer.state.store": "etcd"})
    code, err = run(["--config", config, "--insecure-no-auth"], capsys)
    assert code == 2 and "kvq.enforcer.state.store=etcd: must be one of local, kafka" in err
