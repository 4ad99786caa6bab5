"""BackfillSettings: `kvq.backfill.*` typed."""

from datetime import timedelta

from spark.settings import BackfillSettings
from tests.properties_support import MINIMAL, config_errors

P = "client.quota.callback.static."


def test_step_default_and_override():
    assert BackfillSettings.build(MINIMAL, environ={}).step == timedelta(minutes=1)
    assert BackfillSettings.build({**MINIMAL, "kvq.backfill.step": "PT5M"}).step == timedelta(
        minutes=5
    )


def test_kafka_client_settings_are_not_the_backfills_business():
    jks = {P + "kafka.admin.ssl.truststore.location": "/certs/truststore.jks"}
    assert BackfillSettings.build({**MINIMAL, **jks}, environ={}).step == timedelta(minutes=1)


def test_bad_step_and_typo_are_reported_together():
    errors = config_errors(BackfillSettings, **{"kvq.backfill.step": "0", "kvq.backfill.stpe": "x"})
    assert len(errors) == 2
