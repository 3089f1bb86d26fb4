"""`erpilot mcp --stdio` takes its bearer token from ERPILOT_TOKEN or a file (``--token-file``), never from the
command line, which any local user reads with `ps` (issue #32): ``--token`` is refused and its value unused."""

from __future__ import annotations

import pytest

from erpilot.cli import build_parser
from erpilot.cli.clients import bearer_token

pytestmark = pytest.mark.unit


def parsed(*argv: str):
    return build_parser().parse_args(["mcp", "--stdio", *argv])


def test_the_token_comes_from_a_file_before_the_environment(tmp_path):
    path = tmp_path / "token"
    path.write_text("eyJ.file.token\n")

    assert bearer_token(parsed("--token-file", str(path)), {"ERPILOT_TOKEN": "eyJ.env"}) == "eyJ.file.token"
    assert bearer_token(parsed(), {"ERPILOT_TOKEN": "eyJ.env\n"}) == "eyJ.env"


def test_a_token_on_the_command_line_is_refused_and_never_used(capsys):
    with pytest.raises(SystemExit) as refused:
        bearer_token(parsed("--token", "eyJ.secret"), {"ERPILOT_TOKEN": "eyJ.env"})
    assert "no longer taken" in str(refused.value) and "eyJ.secret" not in str(refused.value)

    with pytest.raises(SystemExit):
        build_parser().parse_args(["mcp", "--help"])
    shown = capsys.readouterr().out
    assert "--token-file PATH" in shown and "--token " not in shown and "--token]" not in shown  # not offered


@pytest.mark.parametrize(("content", "message"), [(None, "cannot read --token-file"), ("\n", "is empty")])
def test_a_missing_or_empty_token_file_says_so(tmp_path, content, message):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)

    with pytest.raises(SystemExit, match=message):
        bearer_token(parsed("--token-file", str(path)), {})


def test_without_either_it_says_what_to_set():
    with pytest.raises(SystemExit, match="set ERPILOT_TOKEN"):
        bearer_token(parsed(), {})

