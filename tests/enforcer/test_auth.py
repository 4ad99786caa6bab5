"""Webhook credentials from files: bearer token and/or user:password lines."""

import base64

import pytest

from enforcer.auth import AuthConfigError, Credentials


def basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_bearer_token_from_file(tmp_path):
    (tmp_path / "t").write_text("s3cret\n")
    creds = Credentials.from_files(str(tmp_path / "t"), None)
    assert creds.allows("Bearer s3cret")
    assert not creds.allows("Bearer s3cre")
    assert not creds.allows("Bearer ")
    assert not creds.allows(None)
    assert not creds.allows(basic("x", "s3cret"))


def test_basic_users_from_file(tmp_path):
    (tmp_path / "b").write_text("# comment\nam:pw1\nops:p:w:2\n")
    creds = Credentials.from_files(None, str(tmp_path / "b"))
    assert creds.allows(basic("am", "pw1"))
    assert creds.allows(basic("ops", "p:w:2")), "passwords may contain ':'"
    assert not creds.allows(basic("am", "pw2"))
    assert not creds.allows(basic("nobody", "pw1"))
    assert not creds.allows("Basic !!!not-base64")
    assert not creds.allows("Bearer pw1")


def test_both_schemes_at_once(tmp_path):
    (tmp_path / "t").write_text("tok")
    (tmp_path / "b").write_text("am:pw")
    creds = Credentials.from_files(str(tmp_path / "t"), str(tmp_path / "b"))
    assert creds.allows("Bearer tok") and creds.allows(basic("am", "pw"))
    assert creds.schemes == ["Bearer", "Basic"]


def test_no_files_means_no_credentials():
    assert Credentials.from_files(None, None) is None


@pytest.mark.parametrize(
    ("token", "basic_text", "message"),
    [
        ("", None, "exactly one token"),
        ("a\nb\n", None, "exactly one token"),
        ("a b", None, "exactly one token"),
        (None, "no-colon\n", "line 1: expected user:password"),
        (None, "\n# only comments\n", "no user:password lines"),
    ],
)
def test_malformed_files_are_config_errors_naming_the_setting(tmp_path, token, basic_text, message):
    token_file = basic_file = None
    if token is not None:
        token_file = tmp_path / "t"
        token_file.write_text(token)
    if basic_text is not None:
        basic_file = tmp_path / "b"
        basic_file.write_text(basic_text)
    with pytest.raises(AuthConfigError, match=message) as info:
        Credentials.from_files(token_file and str(token_file), basic_file and str(basic_file))
    assert "kvq.enforcer.auth." in str(info.value)


def test_missing_file_is_reported_with_its_path(tmp_path):
    with pytest.raises(AuthConfigError, match="cannot read"):
        Credentials.from_files(str(tmp_path / "absent"), None)


def test_a_byte_order_mark_is_not_part_of_the_token_or_the_user(tmp_path):
    (tmp_path / "t").write_bytes(b"\xef\xbb\xbfs3cret\n")
    (tmp_path / "b").write_bytes(b"\xef\xbb\xbfam:pw\n")
    creds = Credentials.from_files(str(tmp_path / "t"), str(tmp_path / "b"))
    assert creds.allows("Bearer s3cret")
    assert creds.allows(basic("am", "pw"))


@pytest.mark.parametrize("which", ["token", "basic"])
def test_a_file_that_is_not_utf8_is_a_config_error(tmp_path, which):
    path = tmp_path / which
    path.write_bytes(b"caf\xe9:pw\n")
    files = (str(path), None) if which == "token" else (None, str(path))
    with pytest.raises(AuthConfigError, match=r"kvq.enforcer.auth.*cannot read: not UTF-8"):
        Credentials.from_files(*files)
