"""Whether the journal's file system can hold an SQLite database in WAL mode.

WAL keeps its index in a memory-mapped `-shm` file and relies on POSIX locks: SQLite's own
documentation says WAL does not work over a network file system, where neither is coherent (NFS,
SMB/CIFS, sshfs, cloud-bucket FUSE mounts). A journal there can lose or corrupt the original
quotas it exists to keep, so start-up refuses it. The type is read from /proc/self/mountinfo, not
by asking the file system, and symbolic links are followed only where a local file system holds
them: a hung network mount cannot hang the check.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ncpfs",
        "9p",
        "afs",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "beegfs",
        "fuse.sshfs",
        "fuse.s3fs",
        "fuse.gcsfuse",
        "fuse.goofys",
        "fuse.rclone",
        "fuse.glusterfs",
        "fuse.cephfs",
        "fuse.juicefs",
        "fuse.blobfuse",
        "fuse.blobfuse2",
        "fuse.mountpoint-s3",
    }
)
"""Types (as mountinfo names them; FUSE as `fuse.<subtype>`) where SQLite's WAL cannot work."""
MOUNTINFO = Path("/proc/self/mountinfo")
_ESCAPE = re.compile(r"\\([0-7]{3})")
_MAX_LINKS = 40  # Linux's MAXSYMLINKS


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fs_type: str
    source: str


def mounts(mountinfo: str) -> list[Mount]:
    """The mounts of a /proc/<pid>/mountinfo text, in its order (a later one covers an earlier
    one at the same place)."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if "-" not in fields:
            continue
        separator = fields.index("-")
        if len(fields) < separator + 3 or len(fields) < 5:
            continue
        found.append(
            Mount(_unescape(fields[4]), fields[separator + 1], _unescape(fields[separator + 2]))
        )
    return found


def mount_of(path: str | os.PathLike[str], mountinfo: str) -> Mount | None:
    """The mount that holds `path`, its symbolic links resolved as far as a local file system
    holds them: a component on a network file system is never asked (a hung NFS server or sshfs
    daemon would hang the question), so a path leading through one is held by it."""
    known = mounts(mountinfo)
    return _holder(_resolve_locally(os.path.abspath(path), known), known)


def _holder(where: str, known: list[Mount]) -> Mount | None:
    """The deepest mount whose mount point is `where` or an ancestor of it, read lexically."""
    best: Mount | None = None
    for mount in known:
        holds = where == mount.mount_point or where.startswith(mount.mount_point.rstrip("/") + "/")
        if holds and (best is None or len(mount.mount_point) >= len(best.mount_point)):
            best = mount
    return best


def _resolve_locally(path: str, known: list[Mount]) -> str:
    """`path` with its symbolic links followed one component at a time, as os.path.realpath
    does, until a component lies on a network file system: from there on it is kept as written,
    since even an lstat of it would wait on the server."""
    pending = path.split("/")
    pending.reverse()
    resolved = "/"
    links_followed = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, name)
        holder = _holder(candidate, known)
        if holder is not None and holder.fs_type in NETWORK_FILESYSTEMS:
            return os.path.join(candidate, *reversed(pending))
        try:
            target = os.readlink(candidate)
        except OSError:  # not a link, or not there (yet): a plain component
            resolved = candidate
            continue
        links_followed += 1
        if links_followed > _MAX_LINKS:  # a loop: the kernel would refuse it with ELOOP too
            return os.path.join(candidate, *reversed(pending))
        pending.extend(reversed(target.split("/")))
        if target.startswith("/"):
            resolved = "/"
    return resolved


def wal_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a journal at `path` cannot be trusted to SQLite's WAL, or None (also when the mounts
    cannot be read: not Linux)."""
    try:
        mountinfo = MOUNTINFO.read_text()
    except OSError:
        return None
    mount = mount_of(path, mountinfo)
    if mount is None or mount.fs_type not in NETWORK_FILESYSTEMS:
        return None
    return (
        f"is on a {mount.fs_type} file system ({mount.source} at {mount.mount_point}), where "
        "SQLite's WAL mode does not work (no coherent shared memory or locks over a network file "
        "system); put the journal on a local disk (in Kubernetes a ReadWriteOnce volume of a "
        "block storage class, not NFS/SMB)"
    )


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (\\040 ...)."""
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)
