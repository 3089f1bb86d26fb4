"""The documentation a newcomer reads is in the repository and stays true to it: the README is a short front door
that links the guide, every relative link in README.md and docs/*.md names a file that exists (the user contract
is docs/SPEC.md; tests/unit/test_citations.py holds the code's citations to it), and every repository path the
docs name in backticks exists, with the function or class it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250
# A path the docs name starts at one of the repository's top-level entries.
TOP_LEVEL = ("services/", "libs/", "src/", "tests/", "docs/", "deploy/", "benchmarks/", "conftest.py",
             "docker-compose.yml", "Dockerfile", "pyproject.toml", "dev")
# `path`, `path:name.name` or `path::name`, alone in one backticked span.
_SPAN = re.compile(r"`([^`\s]+)`")


def _named_paths(text: str) -> list[tuple[str, str | None]]:
    """Every (path, qualified name or None) the text names in backticks, for paths inside the repository."""
    named = []
    for span in _SPAN.findall(text):
        found = re.fullmatch(r"([^:]+)(?:::?(.+))?", span)
        if found is None:
            continue
        path, name = found.group(1).rstrip(".,;"), found.group(2)
        if not path.startswith(TOP_LEVEL) or "$" in path or "<" in path or "{" in path:
            continue
        if path in TOP_LEVEL or "/" in path or path.endswith((".py", ".md", ".yml", ".toml", ".json", ".conf")):
            named.append((path, name or None))
    return named


def _defines(source: str, qualified: str) -> bool:
    """Whether every part of ``a.b`` is a def or class in ``source`` (nesting is not checked, only presence)."""
    return all(re.search(rf"^\s*(async def|def|class) {re.escape(part)}\b", source, re.M)
               for part in qualified.split("."))


def test_the_readme_is_a_front_door_of_at_most_250_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; keep it at most {README_MAX_LINES} and move details to docs/")


def test_the_readme_links_the_user_guide():
    assert "(docs/GUIDE.md)" in (ROOT / "README.md").read_text()


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings (outside code blocks): lower case, punctuation dropped, spaces → -."""
    anchors, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} (.*)", line)):
            anchors.add(re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_names_a_file_in_the_repository_and_a_heading_in_it(doc):
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)]*))?\)", doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        linked = doc.parent / target if target else doc
        assert linked.exists(), f"{doc.name} links {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked.read_text()), f"{doc.name} links {target}#{anchor}: no such heading"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_repository_path_named_exists_with_the_function_it_names(doc):
    missing = []
    for path, name in _named_paths(doc.read_text()):
        if "*" in path:
            if not list(ROOT.glob(path)):
                missing.append(f"{path} (matches nothing)")
            continue
        target = ROOT / path
        if not target.exists():
            missing.append(path)
        elif name and target.suffix == ".py" and re.fullmatch(r"[A-Za-z_][\w.]*", name) \
                and not _defines(target.read_text(), name):
            missing.append(f"{path}:{name} (no such def or class)")
    assert not missing, f"{doc.name} names what is not in the repository: {missing}"


def test_the_path_check_sees_what_it_should():
    text = ("`services/x.py` `libs/platform/src/erpilot_platform/uow.py:UnitOfWork.run` `tests/e2e/conftest.py::stack`"
            " `keys/erp/x.pub` `$ERPILOT_DATA_DIR/keys/` `src/erpilot/cli/`")
    assert _named_paths(text) == [
        ("services/x.py", None), ("libs/platform/src/erpilot_platform/uow.py", "UnitOfWork.run"),
        ("tests/e2e/conftest.py", "stack"), ("src/erpilot/cli/", None)]
    assert {"crash-campaign-erpilot-torture", "7-guarantees"} <= _anchors(
        "# 7. Guarantees\n```\n# not a heading\n```\n## Crash campaign (`erpilot torture`)")
    source = (ROOT / "libs/platform/src/erpilot_platform/uow.py").read_text()
    assert _defines(source, "UnitOfWork.run") and not _defines(source, "UnitOfWork.commit_later")
