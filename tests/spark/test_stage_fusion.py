"""The job's stage fusion (`spark.job.stage_fusion`): graceful-slowdown's wide policy stages are
not fused into one generated method each, and the session is left as it was for its next run."""

from __future__ import annotations

from devkit.archive_generator import write_config
from kvq.settings.config import GRACEFUL_SLOWDOWN, THROTTLE_POLICY, load_config
from spark.job import FUSED_FIELDS_SETTING, stage_fusion
from spark.volume_history import FUSED_FIELDS


def test_graceful_slowdown_fuses_narrow_operators_only_while_its_job_runs(spark, tmp_path):
    properties = write_config(tmp_path / "kvq.properties", interval="PT5S")
    graceful = load_config(properties, {THROTTLE_POLICY: GRACEFUL_SLOWDOWN})
    sparks_own = spark.conf.get(FUSED_FIELDS_SETTING)
    with stage_fusion(spark, graceful):
        assert spark.conf.get(FUSED_FIELDS_SETTING) == str(FUSED_FIELDS)
    assert spark.conf.get(FUSED_FIELDS_SETTING) == sparks_own == "100"


def test_the_proposals_policy_keeps_sparks_fusion(spark, tmp_path):
    proposal = load_config(write_config(tmp_path / "kvq.properties"))
    with stage_fusion(spark, proposal):
        assert spark.conf.get(FUSED_FIELDS_SETTING) == "100"
