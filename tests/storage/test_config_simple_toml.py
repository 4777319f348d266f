"""config.toml's reader: the simple form ``ctx init`` writes is read without ``tomllib``,
and whatever it reads is exactly what ``tomllib`` reads; anything else goes to ``tomllib``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.config import _simple_toml, load_config, render_default_config

FRAGMENTS = [
    "[repo]", "[ retrieval ]", "[llm]", "[a.b]", "[[a]]", "[repo", "[]", "[repo] x = 1",
    'id = "work"', 'id = "tab\there"', 'id = "caf\u00e9"', 'id = "a\\"b"', 'id = "a\\nb"',
    "id = 'literal'", 'id = """multi"""', 'id = "unterminated', "id =", "= 1", "id=1",
    "n = 0", "n = -0", "n = 7", "n = -12", "n = 012", "n = +1", "n = 1_000", "n = 0x1f",
    "n = 99999999999999999999", "f = 1.5", "f = -0.25", "f = 1.", "f = .5", "f = 1e3",
    "f = inf", "f = nan", "b = true", "b = false", "b = True", "b = truefalse",
    'g = ["a", "b"]', 'g = ["a",]', "g = []", "g = [ ]", 'g = [,]', 'g = ["a" "b"]',
    "g = [1, 2]", 'g = ["a", 1]', 'g = [\n"a"]', "a.b = 1", '"quoted" = 1', "k-e_y9 = 1",
    "# comment", "  # indented comment", "x = 1 # trailing", "x = 1#tight", "",
    "   ", "\t", "x = 1\x7f", "# bad \x01 comment", "x = 2", "id = \"dup\"", "\ufeffx = 1",
]
SEPARATORS = ["\n", "\r\n", "\r", ""]


def _outcome(text: str) -> tuple[str, Any]:
    try:
        return "ok", tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return "error", None


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(FRAGMENTS), st.sampled_from(SEPARATORS)), max_size=12))
@pytest.mark.slow
def test_what_the_simple_reader_reads_is_what_tomllib_reads(parts: list[tuple[str, str]]) -> None:
    text = "".join(fragment + sep for fragment, sep in parts)
    simple = _simple_toml(text)
    if simple is not None:  # repr: types too (False == 0 and 1.0 == 1 in Python)
        assert repr(_outcome(text)) == repr(("ok", simple)), text


def test_the_default_config_takes_the_simple_path() -> None:
    text = render_default_config("work")
    assert repr(_simple_toml(text)) == repr(tomllib.loads(text))


def test_reading_the_default_config_does_not_import_tomllib(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.toml"
    path.write_text(render_default_config("work"))
    code = ("import sys; from pathlib import Path; from ctxstore.config import load_config; "
            f"c = load_config(Path({str(path)!r})); print(c.get('repo', 'id'), 'tomllib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["work", "False"]


def test_a_config_beyond_the_simple_form_is_read_by_tomllib(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.toml"
    path.write_text('[retrieval]\nprompt_budget = 0x100\n[llm]\nmodel = "a\\u00e9"\n')
    config = load_config(path)
    assert config.get("retrieval", "prompt_budget") == 256
    assert config.get("llm", "model") == "a\u00e9"


_SIMPLE_LINES = st.one_of(
    st.sampled_from(["[repo]", "[llm]", "[ gc ]", "# c", "", "  "]),
    st.builds(lambda k, v, c: f"{k} = {v}{c}",
              st.sampled_from(["id", "model", "n", "x-y", "9"]),
              st.one_of(st.integers(-10**20, 10**20).map(str),
                        st.floats(allow_nan=False, allow_infinity=False).map(
                            lambda f: f"{f:.6f}"),
                        st.booleans().map(lambda b: str(b).lower()),
                        st.text(st.characters(blacklist_categories=("Cs",)), max_size=8).map(
                            lambda t: '"' + t + '"'),
                        st.lists(st.text("abc \t", max_size=3), max_size=3).map(
                            lambda xs: "[" + ", ".join(f'"{x}"' for x in xs) + "]")),
              st.sampled_from(["", " # note", "#x"])))


@settings(max_examples=1500, deadline=None)
@given(st.lists(_SIMPLE_LINES, max_size=14), st.sampled_from(["\n", "\r\n"]))
@pytest.mark.slow
def test_simple_configs_read_the_same_both_ways(lines: list[str], newline: str) -> None:
    text = newline.join(lines)
    simple = _simple_toml(text)
    if simple is not None:
        assert repr(_outcome(text)) == repr(("ok", simple)), text
