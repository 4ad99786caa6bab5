"""The documentation site builds strictly (`make docs`): a broken link between pages, an anchor
no heading has, a link to a repository file that is not there, or a page left out of every table
of contents fails the build, and so the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.docs.blocks import ROOT


def sphinx_build(source: Path, out: Path) -> subprocess.CompletedProcess:
    """The build `make docs` runs: every warning an error, every page read afresh."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-n",
            "-E",
            "-q",
            "-b",
            "html",
            str(source),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_docs_site_builds_strictly(tmp_path) -> None:
    built = sphinx_build(ROOT / "docs", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "index.html").exists()


def test_the_make_docs_target_runs_the_same_build() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "-m sphinx -W --keep-going -n -E" in makefile


def test_broken_links_fail_the_build(tmp_path) -> None:
    """A repository of three files with the site's configuration: every kind of broken link is
    named in the output and the build fails."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "docs" / "_ext", repo / "docs" / "_ext")
    shutil.copy(ROOT / "docs" / "conf.py", repo / "docs" / "conf.py")
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    (repo / "rules").mkdir()
    (repo / "rules" / "README.md").write_text("# Rules\n\n## The `throttle` alert\n")
    (repo / "docs" / "other.md").write_text("# Other\n\n## Section B\n")
    (repo / "docs" / "orphan.md").write_text("# In no table of contents\n")
    (repo / "docs" / "index.md").write_text(
        "# Home\n\n```{toctree}\nother\n```\n\n"
        "[fine](other.md#section-b) [fine](../rules/README.md#the-throttle-alert)\n"
        "[page anchor](other.md#section-c) [missing page](nothing.md)\n"
        "[file anchor](../rules/README.md#the-alert) [missing file](../rules/none.yml)\n"
    )
    built = sphinx_build(repo / "docs", tmp_path / "site")
    assert built.returncode != 0
    for broken in ("section-c", "nothing", "#the-alert", "rules/none.yml", "orphan"):
        assert broken in built.stderr, (broken, built.stderr)
    assert "section-b" not in built.stderr and "the-throttle-alert" not in built.stderr
