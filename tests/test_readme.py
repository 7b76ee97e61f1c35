"""The README tells the truth about the commands it shows: every `hase <subcommand>` (and its long options)
and every `make <target>` exists, every file it links to is there, and it stays short enough to read."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from hase.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
MAX_LINES = 170

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
HASE = re.compile(r"(?<![\w.-])hase((?: +[^\s#;|&()`]+)+)")
MAKE = re.compile(r"(?<![\w.-])make((?: +[^\s#;|&()`]+)+)")
TARGET = re.compile(r"^([^\s:=#][^:=#]*?)\s*::?(?!=)", re.M)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def code_lines(text: str) -> list[str]:
    """The README's shell code: lines of fenced blocks (comments cut, Python prompts left out) and inline spans."""
    lines = []
    for block in FENCE.findall(text):
        lines += [line.split("#")[0] for line in block.splitlines() if not line.lstrip().startswith((">>>", "..."))]
    prose = FENCE.sub("", text)
    lines += SPAN.findall(prose)
    return lines


def commands(pattern: re.Pattern[str], text: str) -> list[list[str]]:
    """Each invocation the pattern finds in the README's code, as its list of argument words."""
    found = [m.group(1).split() for line in code_lines(text) for m in pattern.finditer(line)]
    return [list(words) for words in sorted({tuple(words) for words in found})]


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name (empty when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def make_targets() -> set[str]:
    """Every target the Makefile defines (rule lines, not recipes or variable assignments)."""
    names: set[str] = set()
    for match in TARGET.finditer(MAKEFILE.read_text(encoding="utf-8")):
        names.update(match.group(1).split())
    return names


README_TEXT = README.read_text(encoding="utf-8")
HASE_COMMANDS = commands(HASE, README_TEXT)
MAKE_COMMANDS = commands(MAKE, README_TEXT)


def test_readme_is_short() -> None:
    n = len(README_TEXT.splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; at most {MAX_LINES}: move detail to docs/"


def test_readme_shows_commands() -> None:
    assert {"predict", "profile", "pipeline"} <= {words[0] for words in HASE_COMMANDS}
    assert {"demo", "test"} <= {word for words in MAKE_COMMANDS for word in words}


@pytest.mark.parametrize("words", HASE_COMMANDS, ids=" ".join)
def test_hase_command_exists(words: list[str]) -> None:
    parser = build_parser()
    for i, word in enumerate(words):
        subs = subparsers(parser)
        if word.startswith("-") or not subs:
            break
        assert word in subs, f"`hase {' '.join(words[:i + 1])}`: no such subcommand; known: {sorted(subs)}"
        parser = subs[word]
    known = set(parser._option_string_actions)
    for word in words:
        option = word.split("=")[0]
        if option.startswith("--"):
            assert option in known, f"`hase {' '.join(words)}`: {parser.prog} has no option {option}"


@pytest.mark.parametrize("words", MAKE_COMMANDS, ids=" ".join)
def test_make_target_exists(words: list[str]) -> None:
    targets = make_targets()
    for word in words:
        if "=" in word or word.startswith("-"):  # a variable (EP=cuda) or an option of make
            continue
        assert word in targets, f"`make {' '.join(words)}`: the Makefile has no target {word!r}"


def test_readme_links_exist() -> None:
    for target in LINK.findall(README_TEXT):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_make_target_parser_reads_the_makefile() -> None:
    assert {"demo", "test", "setup", "collect", "train", "report", "devset"} <= make_targets()
    assert not {"PYTHON", "BIN", "EXTRA"} & make_targets()  # variable assignments are not targets
