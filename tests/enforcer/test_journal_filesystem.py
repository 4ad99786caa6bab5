"""The journal is SQLite in WAL mode: a journal on a network file system is refused at start-up."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from enforcer.journal_filesystem import mount_of

P = "client.quota.callback.static."


BACKSTOP_SECONDS = 900
"""Only for a hang this test cannot see: a wait on the mount fails it at once (below)."""


def enforcer(tmp_path: Path, journal: Path, *flags: str) -> subprocess.CompletedProcess:
    config = tmp_path / "kvq.properties"
    config.write_text(
        f"{P}kafka.admin.bootstrap.servers=127.0.0.1:1\n"
        f"{P}storage.per.volume.limit.min.available.ratio=0.05\n"
    )
    argv = [sys.executable, "-m", "enforcer.cli", "--config", str(config), "--insecure-no-auth"]
    return run_unless_it_waits_on_fuse([*argv, "--journal", str(journal), *flags])


def run_unless_it_waits_on_fuse(argv: list[str]) -> subprocess.CompletedProcess:
    """`argv` run to its end; the test fails as soon as the kernel has it waiting in FUSE (a
    hung mount holds it there forever). Not a wall-clock timeout: CI's unit lane runs niced beside
    the suite's JVMs, where (at nice 19) the enforcer's 1.3 s start took 99 s on this machine."""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        deadline = time.monotonic() + BACKSTOP_SECONDS
        while True:
            try:
                stdout, stderr = process.communicate(timeout=0.2)
                return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
            except subprocess.TimeoutExpired:
                pass
            stack = kernel_stack(process.pid)
            if "fuse_" in stack:
                process.kill()
                pytest.fail(f"{' '.join(argv)} waits on the FUSE mount:\n{stack}")
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"{' '.join(argv)} still runs after {BACKSTOP_SECONDS} s:\n{stack}")


def kernel_stack(pid: int) -> str:
    """Where the kernel holds process `pid` (its stack needs root; its wait channel does not)."""
    for name in ("stack", "wchan"):
        with contextlib.suppress(OSError):
            return Path(f"/proc/{pid}/{name}").read_text()
    return ""


@contextlib.contextmanager
def mounted(where: Path, *mount_args: str, pass_fds=()):
    where.mkdir()
    result = subprocess.run(
        ["mount", *mount_args, str(where)], pass_fds=pass_fds, capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.fail(f"mount {' '.join(mount_args)} {where} failed: {result.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@contextlib.contextmanager
def hung_sshfs_mount(where: Path):
    """A real FUSE mount of type fuse.sshfs, as `sshfs host:/srv DIR` makes, whose daemon hangs:
    the connection stays open and nothing answers, so anything that touches the mount (even an
    lstat of its root) waits until the test ends it, as on an NFS server that stopped answering.
    The check must tell its type without touching it. No sshfs is needed: `mount -i` skips the
    mount.fuse helper (which would run sshfs and connect) and asks the kernel directly, on a
    /dev/fuse descriptor this test holds and never reads."""
    if os.geteuid() != 0:
        reason = "mounts a real FUSE file system, which needs root (CI runs as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    if not Path("/dev/fuse").exists():
        pytest.skip("this kernel or container offers no FUSE device (/dev/fuse is missing)")
    fd = os.open("/dev/fuse", os.O_RDWR)
    try:
        options = f"fd={fd},rootmode=40000,user_id=0,group_id=0"
        mount_args = ("-i", "-t", "fuse.sshfs", "-o", options, "kvq@nas:/srv")
        with mounted(where, *mount_args, pass_fds=(fd,)):
            yield where
    finally:
        os.close(fd)  # after the lazy unmount: closing the device fails whatever still waits


@pytest.mark.parametrize("flags", [(), ("--check-config",)])
def test_a_journal_on_a_hung_sshfs_mount_is_refused_naming_the_file_system(tmp_path, flags):
    with hung_sshfs_mount(tmp_path / "remote") as remote:
        result = enforcer(tmp_path, remote / "journal.sqlite3", *flags)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"kvq-enforcer: kvq.enforcer.journal={remote}/journal.sqlite3 is on a fuse.sshfs file "
        f"system (kvq@nas:/srv at {remote}), where SQLite's WAL mode does not work"
    ), result.stderr
    assert "Traceback" not in result.stderr


def test_a_journal_on_a_local_file_system_is_accepted(tmp_path, mount_tmpfs):
    local = tmp_path / "local"
    mount_tmpfs(local)
    result = enforcer(tmp_path, local / "journal.sqlite3", "--check-config")
    assert result.returncode == 0, result.stderr


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
41 22 0:40 / /var/lib/kvq rw,relatime shared:20 - nfs4 nas:/export/kvq rw,vers=4.2
42 41 0:41 / /var/lib/kvq/local\\040disk rw - ext4 /dev/sdb1 rw
"""


def test_the_mount_holding_a_path_is_the_deepest_one():
    assert mount_of("/var/lib/kvq/journal.sqlite3", MOUNTINFO).fs_type == "nfs4"
    assert mount_of("/var/lib/kvq/local disk/j.sqlite3", MOUNTINFO).fs_type == "ext4"
    assert mount_of("/var/lib/kvqx/j.sqlite3", MOUNTINFO).mount_point == "/"


def mountinfo_with_nfs_at(mount_point: Path) -> str:
    return f"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n41 22 0:40 / {mount_point} rw - nfs4 nas:/x rw\n"


def test_a_link_on_a_local_disk_to_a_network_mount_is_followed(tmp_path):
    (tmp_path / "state").symlink_to(tmp_path / "nfs" / "kvq")
    mountinfo = mountinfo_with_nfs_at(tmp_path / "nfs")
    assert mount_of(tmp_path / "state" / "journal.sqlite3", mountinfo).fs_type == "nfs4"


def test_nothing_on_a_network_mount_is_asked_not_even_whether_it_is_a_link(tmp_path):
    """Here the mountinfo says nfs4 where the disk has a link to a local directory: a resolver
    that asked would follow the link and find ext4."""
    (tmp_path / "local").mkdir()
    (tmp_path / "nfs").symlink_to(tmp_path / "local")
    mountinfo = mountinfo_with_nfs_at(tmp_path / "nfs")
    assert mount_of(tmp_path / "nfs" / "journal.sqlite3", mountinfo).fs_type == "nfs4"
    assert mount_of(tmp_path / "local" / "journal.sqlite3", mountinfo).fs_type == "ext4"


def test_relative_links_dot_dot_and_a_loop_resolve_as_the_kernel_would(tmp_path):
    mountinfo = mountinfo_with_nfs_at(tmp_path / "nfs")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "up").symlink_to("..")
    (tmp_path / "a" / "j").symlink_to("../nfs/journal.sqlite3")
    assert mount_of(tmp_path / "a" / "up" / "nfs" / "x", mountinfo).fs_type == "nfs4"
    assert mount_of(tmp_path / "a" / "j", mountinfo).fs_type == "nfs4"
    assert mount_of(tmp_path / "a" / ".." / "a" / "x", mountinfo).fs_type == "ext4"
    (tmp_path / "loop").symlink_to("loop")
    assert mount_of(tmp_path / "loop" / "j", mountinfo).fs_type == "ext4"
