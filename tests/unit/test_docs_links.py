"""The documentation a newcomer reads is in the repository: the README links the guide, and every
relative link in README.md and docs/*.md names a file that exists (no SPEC.md from outside)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_links_the_user_guide_and_names_no_spec_outside_the_repository():
    readme = (ROOT / "README.md").read_text()
    assert "(docs/GUIDE.md)" in readme
    for doc in DOCS:
        assert "SPEC.md" not in doc.read_text(), f"{doc.name} names SPEC.md, which is not in the repository"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_names_a_file_in_the_repository(doc):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        assert (doc.parent / target).exists(), f"{doc.name} links {target}, which does not exist"
