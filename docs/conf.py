"""The documentation site: Sphinx with MyST (Markdown), built strictly by `make docs` and by
tests/docs/test_site.py, so a broken link, anchor or include fails the suite."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
PROJECT = tomllib.loads((HERE.parent / "pyproject.toml").read_text())["project"]

project = "kafka-volume-quotas"
release = version = PROJECT["version"]
copyright = "the kafka-volume-quotas authors, Apache-2.0"  # noqa: A001 (Sphinx's name)
extensions = ["myst_parser", "repo_links"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
# Anchors as GitHub makes them, for every heading: a link works on GitHub and on the site alike.
myst_heading_anchors = 6
myst_heading_slug_func = "github"
myst_enable_extensions = ["colon_fence", "deflist"]
# Links to repository files outside docs/ (docs/_ext/repo_links.py) point here on the site.
repository_url = PROJECT["urls"]["Source"]
html_theme = "furo"
html_title = f"kafka-volume-quotas {version}"
# Fail on every warning (sphinx-build -W); a nitpicky build also checks every reference.
nitpicky = True
