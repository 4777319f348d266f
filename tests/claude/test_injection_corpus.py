"""Injection corpus: a ``<ctx:*>`` tag runs only where CommonMark shows it as plain text.

Every case holds ``<ctx:remember>`` tags with distinct contents (``M1``, ``M2``, ...) inside
a Markdown construct. The oracle renders the text with markdown-it (CommonMark) and reads
the rendered HTML: a tag "runs" iff its whole text is character data outside ``<code>``,
``<pre>``, ``<blockquote>`` and raw HTML (HTML blocks, inline HTML, comments), which this
renderer replaces by an empty ``<rawhtml>`` element. The parser under test
(``ctxstore.claude.tags``) computes its masks from markdown-it's token stream and source
positions instead, so the two are independent readings of the same CommonMark parse.
Hypothesis then composes the constructs. A representative subset goes through the real
``ctx hook stop`` (``--response`` and a transcript file). RELIABILITY.md PI-01..PI-04, PI-11.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import run_ctx, store_digest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.claude.tags import mask_code, parse_commands
from ctxstore.index import open_index
from ctxstore.repo import Store, open_store


def tag(n: int) -> str:
    return f'<ctx:remember type="fact">M{n}</ctx:remember>'


T1, T2, T3 = tag(1), tag(2), tag(3)
_TAG_RE = re.compile(r'<ctx:remember type="fact">M(\d+)</ctx:remember>')


# -- the oracle: markdown-it's rendered HTML ---------------------------------------------------
class _PlainText(HTMLParser):
    """Character data outside code, pre, blockquote and raw HTML; blocks kept apart."""

    EXCLUDED = frozenset({"code", "pre", "blockquote", "rawhtml"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, name: str, attrs: object) -> None:
        self.parts.append("\x00")  # no tag text can run across an element boundary
        if name in self.EXCLUDED:
            self.depth += 1

    def handle_endtag(self, name: str) -> None:
        self.parts.append("\x00")
        if name in self.EXCLUDED:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth == 0:
            self.parts.append(data)


def _renderer():  # type: ignore[no-untyped-def]
    from markdown_it import MarkdownIt

    def raw(self, tokens, idx, options, env):  # type: ignore[no-untyped-def]
        env.setdefault("raw", []).append(tokens[idx].content)  # kept aside, for reminders
        return "<rawhtml></rawhtml>"

    md = MarkdownIt("commonmark")
    md.add_render_rule("html_block", raw)
    md.add_render_rule("html_inline", raw)
    return md


_MD = _renderer()


def rendered(text: str) -> tuple[set[int], bool]:
    """The tags CommonMark renders as plain text (by their number), and whether a
    ``</system-reminder>`` appears outside code and quotes (as text or raw HTML)."""
    env: dict = {}
    parser = _PlainText()
    parser.feed(_MD.render(text, env))
    parser.close()
    plain = "".join(parser.parts)
    raw = [r for r in env.get("raw", []) if not r.lstrip().startswith("<!--")]
    closes = "</system-reminder>" in plain or any("</system-reminder>" in r for r in raw)
    return {int(n) for n in _TAG_RE.findall(plain)}, closes


def oracle(text: str) -> set[int]:
    """The tags CommonMark renders as plain text (by their number)."""
    return rendered(text)[0]


def runs(text: str) -> set[int]:
    """The tags ctx's parser accepts as commands (by their number)."""
    return {int(c.content[1:]) for c in parse_commands(text)[0] if c.name == "remember"}


# -- the corpus -----------------------------------------------------------------------------------
CORPUS: dict[str, str] = {
    "plain": f"Noted. {T1}",
    "plain-two-lines": f"first line\n{T1}\nlast",
    "fence-backticks": f"```\n{T1}\n```\n{T2}",
    "fence-tildes": f"~~~\n{T1}\n~~~",
    "fence-info": f"```xml\n{T1}\n```",
    "fence-4-backticks": f"````\n```\n{T1}\n```\n````\n{T2}",
    "fence-indent-1": f" ```\n{T1}\n ```\n{T2}",
    "fence-indent-2": f"  ~~~\n  {T1}\n  ~~~",
    "fence-indent-3": f"   ```\n{T1}\n   ```\n{T2}",
    "fence-indent-4-is-paragraph": f"para\n    ```\n{T1}\n    ```",
    "fence-unclosed": f"text\n```\n{T1}\n\n{T2}",
    "fence-closed-by-shorter": f"````\n{T1}\n```\n{T2}",
    "fence-tilde-not-closed-by-backticks": f"~~~\n{T1}\n```\n{T2}",
    "fence-info-with-backtick": f"``` a`b\n{T1}\n```",
    "fence-in-list-item": f"- item\n\n  ```\n  {T1}\n  ```\n- {T2}",
    "fence-on-list-marker-line": f"- ```\n  {T1}\n  ```\n{T2}",
    "fence-on-list-marker-line-lazy": f"- ```\n{T1}\n```",
    "fence-on-ordered-marker": f"1. ```\n   {T1}\n   ```",
    "fence-on-star-marker-tildes": f"* ~~~\n  {T1}\n",
    "fence-in-quote": f"> ```\n> {T1}\n> ```\n{T2}",
    "fence-in-quote-lazy": f"> ```\n{T1}\n```",
    "quote": f"> {T1}\n\n{T2}",
    "quote-indented": f"   > {T1}",
    "quote-lazy-continuation": f"> quoted\n{T1}\n\n{T2}",
    "quote-lazy-two-lines": f"> quoted\nstill quoted\n{T1}",
    "quote-nested": f"> > {T1}",
    "quote-in-list": f"- > {T1}\n- {T2}",
    "list-nested-continuation": f"- a\n  - b\n    {T1}",
    "list-nested-indented-code": f"- a\n  - b\n\n          {T1}",
    "list-paragraph": f"1. one\n2. {T1}",
    "indented-code": f"para\n\n    {T1}\n\n{T2}",
    "indented-code-tab": f"para\n\n\t{T1}",
    "indented-continuation-is-paragraph": f"para\n    {T1}",
    "inline-code": f"use `{T1}` or {T2}",
    "inline-code-double": f"use ``a ` {T1}`` here",
    "inline-code-unmatched": f"a ` tick {T1}",
    "inline-code-mismatched": f"``{T1}` x",
    "inline-code-across-lines": f"a `start\n{T1}\nend` b",
    "inline-code-across-paragraphs": f"a `start\n\n{T1}\n\nend` b",
    "html-comment-block": f"<!-- {T1} -->\n\n{T2}",
    "html-comment-inline": f"a <!-- {T1} --> b {T2}",
    "html-comment-multiline": f"<!--\n{T1}\n-->\n{T2}",
    "html-comment-unclosed-inline": f"a <!-- {T1}",
    "html-comment-unclosed-block": f"<!-- x\n\n{T1}",
    "html-comment-interrupts-paragraph": f"para\n<!-- x\n{T1} -->",
    "html-block-div": f"<div>\n{T1}\n</div>",
    "html-block-ends-at-blank": f"<div>\n\n{T1}\n\n</div>",
    "html-block-details": f"<details>\n{T1}",
    "html-block-pre": f"<pre>\n{T1}\n\n{T2}\n</pre>\n{T3}",
    "html-inline-span": f"<span>{T1}</span>",
    "html-inline-attribute": f'a <span title="{T1}"> b',
    "heading-atx": f"# {T1}",
    "heading-atx-closed": f"## {T1} ##",
    "heading-setext-eq": f"{T1}\n===",
    "heading-setext-dash": f"{T1}\n---\n{T2}",
    "thematic-break": f"***\n{T1}",
    "table": f"| a | b |\n|---|---|\n| {T1} | x |",
    "table-code-cell": f"| a | b |\n|---|---|\n| `{T1}` | x |",
    "emphasis": f"*{T1}* and **{T2}**",
    "link-text": f"[{T1}](http://example.com)",
    "image-alt": f"![{T1}](http://example.com/x.png) {T2}",
    "link-reference-title": f"[r]: http://example.com '{T1}'\n\n{T2}",
    "backslash-before-tag": f"\\{T1}",
    "crlf-fence": f"```\r\n{T1}\r\n```\r\n{T2}",
    "crlf-quote-lazy": f"> q\r\n{T1}",
    "cr-only-fence": f"```\r{T1}\r```\r{T2}",
    "crlf-indented-code": f"para\r\n\r\n    {T1}\r\n",
    "tab-fence-list": f"-\t```\n\t{T1}\n\t```\n{T2}",
    "tab-before-quote": f"\t> {T1}",
    "nul-in-text": f"a\x00b {T1}\n```\n\x00{T2}\n```",
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_tag_runs_iff_commonmark_shows_it_as_plain_text(name: str) -> None:
    text = CORPUS[name]
    assert runs(text) == oracle(text), (name, mask_code(text))


# The attacks of issue 11 item 4, and what CommonMark says about them, pinned explicitly.
@pytest.mark.parametrize("text,expected", [
    # A reminder mentioned before a fence whose closing tag sits inside the fence.
    (f"See <system-reminder> here.\n```\n</system-reminder>\n{T1}\n```\n{T2}", {2}),
    (f"<system-reminder>\n```\n</system-reminder>\n{T1}\n```", set()),
    (f"`<system-reminder>` then\n```\n</system-reminder>\n{T1}\n```\n{T2}", {2}),
    # An unclosed mention drops nothing after it.
    (f"I saw a <system-reminder> earlier. {T1}\n\n{T2}", {1, 2}),
    (f"`</system-reminder>` {T1} <system-reminder> {T2}", {1, 2}),
    # A real reminder (closed, outside code) is not the assistant's text.
    (f"done {T1}\n<system-reminder>\n{T2}\n</system-reminder>\nafter {T3}", {1, 3}),
    (f"a<system-reminder>{T1}</system-reminder>b {T2}", {2}),
    (f"a<system-reminder>\n\n{T1}\n\n</system-reminder> {T2}", {2}),
    # A closing tag in code does not close a reminder; one in a quote neither.
    (f"<system-reminder> x `</system-reminder>` {T1}", {1}),
    (f"a <system-reminder> b\n> </system-reminder>\n\n{T1}", {1}),
    # Lazy continuation and fences on list-marker lines.
    (f"> quoted\n{T1}", set()),
    (f"- ```\n  {T1}\n  ```", set()),
    (f"1. ~~~\n   {T1}", set()),
])
def test_corpus_reminders_lazy_quotes_and_list_fences(text: str, expected: set[int]) -> None:
    assert runs(text) == expected


# -- Hypothesis: compositions of the constructs --------------------------------------------------
_PIECES = [
    "{t}", "para {t} text", "```\n{t}\n```", "~~~\n{t}", "````\n{t}\n```", "   ```\n{t}",
    "- ```\n  {t}\n  ```", "- ```\n{t}", "> {t}", "> q\n{t}", "para\n\n    {t}", "\t{t}",
    "`{t}`", "``a ` {t}``", "` {t}", "<!-- {t} -->", "a <!-- {t}", "<!--\n{t}", "<div>\n{t}",
    "# {t}", "{t}\n---", "| a |\n|---|\n| {t} |", "*{t}*", "[{t}](u)", "![{t}](u)",
    "- a\n  - b\n    {t}", "1. x\n\n       {t}", "<span>{t}</span>", "```", "`", "~~~", "> ",
    "- ", "    ", "<system-reminder>", "`</system-reminder>`", "```\n</system-reminder>\n```",
    "> </system-reminder>", "<!-- </system-reminder> -->", "***", "<pre>", "</pre>",
]


@st.composite
def compositions(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8))
    seps = draw(st.lists(st.sampled_from(["\n", "\n\n", " ", "\n  ", "\n\t"]),
                         min_size=len(pieces), max_size=len(pieces)))
    out = []
    for i, (piece, sep) in enumerate(zip(pieces, seps, strict=True)):
        out.append(piece.replace("{t}", tag(i + 1)) + sep)
    text = "".join(out)
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return text.replace("\n", eol)


@given(compositions())
def test_corpus_compositions_agree_with_commonmark(text: str) -> None:
    plain, reminder_closes = rendered(text)
    found = runs(text)
    # Never a tag CommonMark does not show as plain text; exactly those unless a
    # <system-reminder> section (closed outside code and quotes) hides some of them.
    assert found <= plain, mask_code(text)
    if not reminder_closes:
        assert found == plain, mask_code(text)


@given(compositions())
def test_corpus_mask_keeps_length_and_line_breaks(text: str) -> None:
    masked = mask_code(text)
    assert len(masked) == len(text)
    assert [i for i, c in enumerate(masked) if c in "\r\n"] == [i for i, c in enumerate(text) if c in "\r\n"]


# -- through the real `ctx hook stop` ---------------------------------------------------------------
SUBSET = ["plain", "fence-backticks", "fence-on-list-marker-line", "fence-on-list-marker-line-lazy",
          "quote-lazy-continuation", "inline-code-double", "html-comment-inline", "html-block-div",
          "indented-code", "crlf-fence", "heading-setext-dash"]
ATTACKS = {
    "reminder-before-fence": (f"See <system-reminder> here.\n```\n</system-reminder>\n{T1}\n```\n{T2}",
                              {2}),
    "reminder-unclosed": (f"I saw a <system-reminder> earlier. {T1}", {1}),
}


def _contents(store: Store) -> set[str]:
    conn = open_index(open_store(store.root))
    try:
        return {row[0] for row in conn.execute("SELECT content FROM nodes")}
    finally:
        conn.close()


def _stop(store: Store, args: list[str], stdin: dict) -> dict:
    res = run_ctx(["hook", "stop", *args], stdin=json.dumps(stdin))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 1
    return json.loads(res.stdout)


def _cases() -> list[tuple[str, str, set[int]]]:
    out = [(name, CORPUS[name], oracle(CORPUS[name])) for name in SUBSET]
    out += [(name, text, want) for name, (text, want) in ATTACKS.items()]
    return out


@pytest.mark.parametrize("name,text,want", _cases(), ids=[c[0] for c in _cases()])
def test_corpus_through_hook_stop_response(store: Store, name: str, text: str, want: set[int]) -> None:
    payload = {"session_id": "s1", "cwd": str(store.worktree), "hook_event_name": "Stop"}
    _stop(store, ["--response", text], payload)
    assert _contents(store) == {f"M{n}" for n in want}


@pytest.mark.parametrize("name,text,want", _cases(), ids=[c[0] for c in _cases()])
def test_corpus_through_hook_stop_transcript(store: Store, tmp_path: Path, name: str, text: str,
                                            want: set[int]) -> None:
    path = tmp_path / "t.jsonl"
    lines = [{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "go"}},
             {"type": "assistant", "uuid": "a1", "message": {
                 "id": "m1", "role": "assistant", "content": [{"type": "text", "text": text}]}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    payload = {"session_id": "s1", "cwd": str(store.worktree), "hook_event_name": "Stop",
               "transcript_path": str(path)}
    _stop(store, [], payload)
    assert _contents(store) == {f"M{n}" for n in want}
    # last_assistant_message alone (the transcript lags: it holds only the prompt).
    path.write_text(json.dumps(lines[0]) + "\n")
    before = store_digest(store.root)
    _stop(store, [], {**payload, "session_id": "s2", "last_assistant_message": text})
    assert _contents(store) == {f"M{n}" for n in want}
    if not want:
        assert store_digest(store.root) == before
