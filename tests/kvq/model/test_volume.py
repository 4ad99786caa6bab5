"""Volume and LogDirDescription: the proposal's Volume, and which log dirs are not volumes."""

from kvq.model.volume import UNUSABLE_ERROR, UNUSABLE_NO_KIP827, LogDirDescription, Volume


def test_volume_derives_used_bytes_and_available_ratio():
    volume = Volume(broker_id=1, log_dir="/data/1", total_bytes=1000, available_bytes=250)
    assert volume.used_bytes == 750
    assert volume.available_ratio == 0.25


def test_healthy_log_dir_is_a_volume():
    log_dir = LogDirDescription(2, "/data/2", total_bytes=100, usable_bytes=40)
    assert log_dir.unusable_reason is None
    assert log_dir.to_volume() == Volume(2, "/data/2", 100, 40)


def test_log_dir_with_an_error_code_is_not_a_volume():
    log_dir = LogDirDescription(2, "/data/2", 100, 40, error_code=56)  # KAFKA_STORAGE_ERROR
    assert log_dir.unusable_reason == UNUSABLE_ERROR
    assert log_dir.to_volume() is None


def test_pre_kip827_broker_reports_minus_one_and_is_not_a_volume():
    log_dir = LogDirDescription(3, "/data/3", total_bytes=-1, usable_bytes=-1)
    assert log_dir.unusable_reason == UNUSABLE_NO_KIP827
    assert log_dir.to_volume() is None


def test_zero_total_bytes_cannot_give_a_ratio_so_is_not_a_volume():
    assert LogDirDescription(3, "/d", total_bytes=0, usable_bytes=0).to_volume() is None
