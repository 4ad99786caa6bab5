"""Links from the docs to files of the repository outside docs/ (a rules file, a chart, a
component's README): on GitHub they are relative links and work as they are; on the site they
become links to the same file in the project's repository. Either way the file must exist, and an
anchor into a markdown file must name one of its headings (GitHub's slugs), or the strict build
fails, as it does for a broken link between pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from markdown_it import MarkdownIt
from myst_parser.slugs import github_slugify, unique_slug
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)


def heading_anchors(markdown: Path) -> set[str]:
    """The anchors GitHub gives the headings of `markdown`."""
    anchors: set[str] = set()
    tokens = MarkdownIt("commonmark").parse(markdown.read_text())
    for opening, inline in zip(tokens, tokens[1:], strict=False):
        if opening.type == "heading_open":
            text = "".join(c.content for c in inline.children or [] if c.type != "softbreak")
            anchors.add(unique_slug(github_slugify(text), anchors))
    return anchors


def _is_link(node: nodes.Node) -> bool:
    """A MyST link (unresolved yet), or a link MyST made a download (a file, not a page)."""
    if isinstance(node, addnodes.download_reference):
        return True
    return isinstance(node, addnodes.pending_xref) and node.get("reftype") == "myst"


class RepositoryLinks(SphinxPostTransform):
    """Runs before MyST's resolver (priority 9), which only knows the pages of the site."""

    default_priority = 8

    def run(self, only: type[nodes.Element] | None = None, **kwargs: Any) -> None:
        source = Path(self.env.srcdir)
        root = source.parent
        base = self.config.repository_url.rstrip("/")
        for node in list(self.document.findall(_is_link)):
            if only is not None and not isinstance(node, only):
                continue
            path, anchor = self._target(node, source)
            if path is None or path.is_relative_to(source) or not path.is_relative_to(root):
                continue
            if not path.exists():
                LOGGER.warning(
                    "link to a missing file of the repository: %s",
                    path.relative_to(root),
                    type="repo_links",
                    location=node,
                )
                continue
            if anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
                LOGGER.warning(
                    "%s has no heading with anchor #%s",
                    path.relative_to(root),
                    anchor,
                    type="repo_links",
                    location=node,
                )
            kind = "tree" if path.is_dir() else "blob"
            url = f"{base}/{kind}/main/{path.relative_to(root).as_posix()}"
            link = nodes.reference("", "", refuri=url + (f"#{anchor}" if anchor else ""))
            link += node[0].deepcopy()
            node.replace_self(link)

    def _target(self, node: nodes.Element, source: Path) -> tuple[Path | None, str]:
        """The file a link points to, and its anchor."""
        if node.get("refdomain") == "doc":
            if node["reftarget"] in self.env.all_docs:  # a page of the site: MyST's own
                return None, ""
            # a markdown file outside the site: MyST gives its absolute path without ".md"
            return Path(node["reftarget"] + ".md"), node.get("reftargetid") or ""
        target, _, anchor = str(node["reftarget"]).partition("#")
        if not target or "://" in target:
            return None, ""
        page_dir = (source / self.env.doc2path(node.get("refdoc", self.env.docname))).parent
        return (page_dir / target).resolve(), anchor


def _links_before_downloads(app: Sphinx, doctree: nodes.document) -> None:
    """Links MyST made downloads are resolved as the page is read, before Sphinx's collector
    copies every downloaded file into the site (a repository file is linked, not copied)."""
    transform = RepositoryLinks(doctree)
    transform.run(only=addnodes.download_reference)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("repository_url", "", "env")
    app.connect("doctree-read", _links_before_downloads, priority=400)
    app.add_post_transform(RepositoryLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
