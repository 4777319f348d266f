"""Checks that replaced a regular expression on the hook path must agree with it.

Compiling ``[\\ud800-\\udfff]`` costs ~2 ms and ``[0-9a-f]{64}`` ~0.7 ms in every process
that imports their module; the plain checks that replaced them must accept and reject
exactly what the expressions did.
"""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from ctxstore.claude.inject import sanitize_text
from ctxstore.errors import RefNotFound
from ctxstore.memory.transcript import clean_text
from ctxstore.refs import parse_pointer

SURROGATE = re.compile(r"[\ud800-\udfff]")
HEX_LINE = re.compile(rb"[0-9a-f]{64}")
TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)


@given(TEXT)
@example("a\ud83d lone")
@example("\udfff")
@example("pair \ud83d\ude00 as two code points")
def test_surrogates_are_replaced_as_the_expression_did(text: str) -> None:
    assert sanitize_text(text) == SURROGATE.sub("\ufffd", text)
    assert clean_text(text) == SURROGATE.sub("\ufffd", text).strip()


@given(st.one_of(st.binary(min_size=60, max_size=68),
                 st.text("0123456789abcdefABCDEF g", min_size=62, max_size=66).map(str.encode)))
@example(b"0" * 64)
@example(b"A" * 64)
@example(b"0" * 63)
def test_a_pointer_line_is_an_id_exactly_when_the_expression_said(line: bytes) -> None:
    data = line.replace(b"\n", b" ").replace(b"\r", b" ") + b"\n"
    lines = [x.strip() for x in data.splitlines() if x.strip()]
    try:
        parse_pointer("HEAD", data)
        accepted = True
    except RefNotFound:
        accepted = False
    expected = bool(lines) and all(HEX_LINE.fullmatch(x) for x in lines) \
        and not any(x.startswith((b"<<<<<<<", b"|||||||", b"=======", b">>>>>>>")) for x in lines)
    assert accepted == expected
