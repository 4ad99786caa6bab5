"""Every alert links its section of docs/runbook.md (`runbook_url`), every link of the runbook
lands on a heading GitHub renders, and the Helm chart points the links where its values say."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

import yaml

from devkit import kubernetes_manifests
from tests.deploy.rendering import documents

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "rules" / "kafka-volume-quotas.rules.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"
SOURCE = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"]
RUNBOOK_URL = f"{SOURCE}/blob/main/docs/runbook.md"
"""Where the rules file's runbook_url point: the runbook on the project's main branch."""
CHART_VALUES = kubernetes_manifests.CHART / "values.yaml"


def alerts(groups: list[dict]) -> dict[str, dict]:
    return {rule["alert"]: rule for group in groups for rule in group["rules"] if "alert" in rule}


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a page: lower case, punctuation dropped (`_` and
    `-` kept), spaces to `-`; a repeated anchor gets -1, -2, ..."""
    without_code = re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S)
    seen: Counter[str] = Counter()
    anchors = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", without_code, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return anchors


def test_the_anchors_are_githubs() -> None:
    page = "# Runbook\n## The remedy: Cruise Control's `disk` goals\n## 5. Who else\n## Who else\n"
    page += "```\n# not a heading\n```\n## Who else\n"
    assert github_anchors(page) == {
        "runbook",
        "the-remedy-cruise-controls-disk-goals",
        "5-who-else",
        "who-else",
        "who-else-1",
    }


def test_every_alert_links_its_own_section_of_the_runbook() -> None:
    anchors = github_anchors(RUNBOOK.read_text())
    for name, rule in alerts(yaml.safe_load(RULES.read_text())["groups"]).items():
        url = rule["annotations"].get("runbook_url")
        assert url == f"{RUNBOOK_URL}#{name.lower()}", name
        assert name.lower() in anchors, f"docs/runbook.md has no heading {name}"


def test_every_section_of_the_runbook_is_an_alert() -> None:
    """A renamed or removed alert leaves no orphan section behind."""
    sections = re.findall(r"^### (\S+)$", RUNBOOK.read_text(), flags=re.M)
    assert sorted(sections) == sorted(alerts(yaml.safe_load(RULES.read_text())["groups"]))


def test_the_runbooks_links_to_the_repository_land() -> None:
    """Relative links of docs/runbook.md name files that exist and headings they have."""
    text = RUNBOOK.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        path, _, anchor = link.partition("#")
        target = (RUNBOOK.parent / path).resolve() if path else RUNBOOK
        assert target.is_file(), link
        if anchor:
            assert anchor in github_anchors(target.read_text()), link


def rendered_runbook_urls(*values: str) -> dict[str, str]:
    (rule,) = [
        doc
        for doc in documents(kubernetes_manifests.helm_template(*values))
        if doc["kind"] == "PrometheusRule"
    ]
    groups = rule["spec"]["groups"]
    return {name: r["annotations"]["runbook_url"] for name, r in alerts(groups).items()}


def test_the_chart_points_the_runbook_urls_at_runbook_base_url() -> None:
    default = yaml.safe_load(CHART_VALUES.read_text())["prometheusRule"]["runbookBaseUrl"]
    assert default == RUNBOOK_URL
    mirror = "https://git.example.com/platform/kvq/-/blob/v0.1.0/docs/runbook.md"
    moved = rendered_runbook_urls("--set", f"prometheusRule.runbookBaseUrl={mirror}")
    assert moved and moved == {name: f"{mirror}#{name.lower()}" for name in moved}
    kept = rendered_runbook_urls("--set", "prometheusRule.runbookBaseUrl=")
    assert kept == {name: f"{RUNBOOK_URL}#{name.lower()}" for name in kept}
