"""Volume and LogDirDescription: the proposal's Volume, and which log dirs are not volumes."""

from kvq.model.volume import UNUSABLE_ERROR, UNUSABLE_UNKNOWN_SIZE, LogDirDescription, Volume


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
    assert log_dir.unusable_reason == UNUSABLE_UNKNOWN_SIZE
    assert log_dir.to_volume() is None


def test_total_zero_usable_zero_is_a_volume_with_nothing_available():
    """As in the Strimzi plugin: present sizes of 0 are a volume, its ratio is 0 (not unusable)."""
    log_dir = LogDirDescription(3, "/d", total_bytes=0, usable_bytes=0)
    assert log_dir.unusable_reason is None
    volume = log_dir.to_volume()
    assert volume == Volume(3, "/d", 0, 0)
    assert volume.available_ratio == 0.0


def test_only_minus_one_in_either_size_is_unknown():
    assert LogDirDescription(3, "/d", -1, 0).unusable_reason == UNUSABLE_UNKNOWN_SIZE
    assert LogDirDescription(3, "/d", 100, -1).unusable_reason == UNUSABLE_UNKNOWN_SIZE
    assert LogDirDescription(3, "/d", -1, -1, error_code=56).unusable_reason == UNUSABLE_ERROR


def test_the_unusable_rule_is_built_from_operators_only():
    """has_error/lacks_size evaluate Spark Columns too: anything with !=, < and | works."""
    from kvq.model.volume import has_error, lacks_size

    class Expr:
        def __init__(self, text):
            self.text = text

        def __ne__(self, other):
            return Expr(f"({self.text} != {other})")

        def __lt__(self, other):
            return Expr(f"({self.text} < {other})")

        def __or__(self, other):
            return Expr(f"({self.text} | {other.text})")

    assert has_error(Expr("e")).text == "(e != 0)"
    assert lacks_size(Expr("t"), Expr("u")).text == "((t < 0) | (u < 0))"
