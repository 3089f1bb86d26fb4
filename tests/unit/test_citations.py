"""The code cites no document that is not in the repository (issue 33): every "SPEC §n" (or "§n.m": item m of
section n) names a section of docs/SPEC.md, the user contract; every "GUIDE.md §n" a section of that document;
every other document it names (``*.md``, PITFALLS, STYLE) is a file of the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "SPEC.md"
# Copies of documents from outside, kept verbatim: what they cite is theirs; and this test's own examples.
COPIED = {"docs/SPEC.md", "docs/PITFALLS.md", "tests/unit/test_citations.py"}
TEXT = (".py", ".md", ".toml", ".yml", ".yaml", ".html", ".js", ".css", ".sh", ".conf", ".txt", ".cfg", ".ini")
# "SPEC §2–§3, §10", "SPEC §4/§9", "SPEC §3.2": the section list after one "SPEC".
_SPEC_LIST = re.compile(r"\bSPEC\s+((?:§\d+(?:\.\d+)?(?:\s*(?:,|/|–|-|and|or)\s*)?)+)")
_SECTION = re.compile(r"§(\d+)(?:\.(\d+))?")
_DOC_SECTION = re.compile(r"\b([A-Z]+\.md)\s+§(\d+)")
_DOC = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[A-Z][A-Z_]{2,}\.md)\b|\b(PITFALLS|STYLE)\b(?!\.md)")


def _tracked() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return listed.split()


def _code() -> dict[str, str]:
    """Every tracked text file but the copied documents, by path."""
    found = {}
    for name in _tracked():
        path = ROOT / name
        if name in COPIED or name.startswith("docs/asyncapi/") or not path.is_file():
            continue
        if name.endswith(TEXT) or name in ("dev", "Dockerfile"):
            found[name] = path.read_text(errors="replace")
    return found


def _sections(markdown: str) -> dict[int, set[int]]:
    """Each numbered ``## n.`` section with the numbers of the items of its top-level numbered lists."""
    sections: dict[int, set[int]] = {}
    current = None
    for line in markdown.splitlines():
        if heading := re.match(r"^## (\d+)\.", line):
            current = int(heading.group(1))
            sections[current] = set()
        elif current is not None and (item := re.match(r"^(\d+)\. ", line)):
            sections[current].add(int(item.group(1)))
    return sections


def spec_citations(text: str) -> list[tuple[int, int | None]]:
    return [(int(section), int(item) if item else None)
            for listed in _SPEC_LIST.findall(text) for section, item in _SECTION.findall(listed)]


def unknown_spec_citations(files: dict[str, str], spec: str) -> list[str]:
    sections = _sections(spec)
    wrong = []
    for name, text in files.items():
        for section, item in spec_citations(text):
            if section not in sections or (item is not None and item not in sections[section]):
                wrong.append(f"{name}: SPEC §{section}{f'.{item}' if item else ''}")
    return wrong


def missing_documents(files: dict[str, str], tracked: list[str]) -> list[str]:
    """Documents named that are not in the repository: a path must exist as named (from the root, or from the
    citing file's folder), a bare name somewhere in the repository (an installed copy keeps its name)."""
    names = {Path(path).name for path in tracked}
    missing = []
    for name, text in files.items():
        for path, bare in _DOC.findall(text):
            cited = path or f"{bare}.md"
            exists = (cited in names if "/" not in cited
                      else (ROOT / cited).exists() or (ROOT / name).parent.joinpath(cited).exists()
                      or Path(cited).name in names and not cited.startswith("docs/"))
            if not exists:
                missing.append(f"{name}: {cited}")
    return sorted(set(missing))


def test_the_user_contract_is_in_the_repository():
    assert SPEC.exists() and "## 11. Fourth round" in SPEC.read_text()


def test_every_spec_citation_names_a_section_of_docs_spec():
    files = _code()
    assert sum(len(spec_citations(text)) for text in files.values()) > 100  # the scan finds the citations
    assert unknown_spec_citations(files, SPEC.read_text()) == []


def test_every_section_of_another_document_cited_exists():
    wrong = []
    for name, text in _code().items():
        for doc, section in _DOC_SECTION.findall(text):
            target = next((ROOT / folder / doc for folder in ("", "docs") if (ROOT / folder / doc).exists()), None)
            if target is None or int(section) not in _sections(target.read_text()):
                wrong.append(f"{name}: {doc} §{section}")
    assert wrong == []


def test_every_document_the_code_names_is_in_the_repository():
    assert missing_documents(_code(), _tracked()) == []


def test_a_citation_of_what_is_not_there_is_found():
    spec = "## 3. The life of a write\n\n1. **Prepare.**\n2. **Request approval.**\n"
    files = {"a.py": "(SPEC §3, §4)", "b.py": "SPEC §3.2", "c.py": "SPEC §3.7", "d.py": "see PITFALLS and NOPE.md"}
    assert unknown_spec_citations(files, spec) == ["a.py: SPEC §4", "c.py: SPEC §3.7"]
    assert missing_documents(files, ["docs/PITFALLS.md"]) == ["d.py: NOPE.md"]
