"""A chunk's text is cut from its file's text, kept once and compressed (code schema 4).

``ctx search`` and ``ctx pack`` must show exactly the text ``chunk_file`` cut, whatever the
file's line endings and however its module header is split around its definitions; and the
text must not be stored a second time per chunk.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

from _ingestlib import ctx, make_work, query, write
from conftest import run_ctx

from ctxstore.index.chunks import chunk_file, chunk_text, pack_text, unpack_lines
from ctxstore.model.code import CodeSymbol

HEADER_SPLIT = '''"""Module doc."""
import os

LIMIT = 3


def first(x):
    return os.path.join(x, "one")


RETRIES = 7  # between the definitions: part of the module header


class Second:
    def run(self):
        return LIMIT


if __name__ == "__main__":
    first("zz_tail_marker")
'''


def _symbol(qualname: str, kind: str, start: int, end: int, parent: str | None) -> CodeSymbol:
    name = qualname.rsplit(".", 1)[-1]
    return CodeSymbol(qualname, name, kind, parent, None, None, 0, 0, start, end, None)


def test_chunk_text_gives_back_every_chunk_of_random_files() -> None:
    """``chunk_text`` over ``unpack_lines(pack_text(text))`` is each ``Chunk.text``."""
    rng = random.Random(30)
    endings = ["\n", "\r\n", "\r", "\x0c", "\u2028", "\x85"]
    for _ in range(300):
        lines = [rng.choice(["x = 1", "", "  é ✓", "def f():", "\t"]) + rng.choice(endings)
                 for _ in range(rng.randint(1, 80))]
        if rng.random() < 0.5:
            lines[-1] = lines[-1].rstrip("\n\r\x0c\u2028\x85")  # no final line ending
        text = "".join(lines)
        n = len(text.splitlines())
        symbols = [_symbol("m", "module", 1, n, None)]
        line = 1
        while line < n and rng.random() < 0.8:  # definitions with gaps between them
            line += rng.randint(0, 4)
            end = min(n, line + rng.randint(0, 6))
            if line > n:
                break
            symbols.append(_symbol(f"m.f{line}", rng.choice(["function", "class"]), line, end, "m"))
            line = end + 1
        data = pack_text(text)
        for chunk in chunk_file(text, symbols):
            assert chunk_text(unpack_lines(data, len(text.encode())), chunk.start_line,
                              chunk.end_line, chunk.spans) == chunk.text


def test_search_shows_a_split_module_header_whole(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"pkg/mod.py": HEADER_SPLIT, "pkg/crlf.py": HEADER_SPLIT.replace(
        "\n", "\r\n").replace("zz_tail_marker", "zz_crlf_marker")})
    ctx(ctx_dir, "index")
    header = ('"""Module doc."""\nimport os\n\nLIMIT = 3\n\n\n\n\nRETRIES = 7  # between the '
              'definitions: part of the module header\n\n\n\n\nif __name__ == "__main__":\n'
              '    first("zz_tail_marker")\n')
    rows = query(ctx_dir, "SELECT kind, start_line, end_line, text FROM chunks WHERE path ="
                 " 'pkg/mod.py' ORDER BY start_line, kind")
    assert rows[0] == ("module", 1, 20, header)
    assert ("function", 7, 8, 'def first(x):\n    return os.path.join(x, "one")\n') in rows
    res = run_ctx(["--ctx-dir", str(ctx_dir), "--format", "json", "search", "zz_tail_marker",
                   "--kind", "chunk"], cwd=ctx_dir.parent)  # the installed CLI
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [r["key"].split(":")[0] for r in doc["results"]][:1] == ["pkg/mod.py"]
    hit = doc["results"][0]
    assert (hit["start_line"], hit["end_line"], hit["snippet"]) == (1, 20, '"""Module doc."""')
    crlf = query(ctx_dir, "SELECT text FROM chunks WHERE path = 'pkg/crlf.py' AND kind = 'module'")
    assert crlf == [(header.replace("\n", "\r\n").replace("zz_tail_marker", "zz_crlf_marker"),)]


def test_a_file_text_is_stored_once_compressed(tmp_path: Path) -> None:
    """No chunk's text is in the code index as written: each file's text once, compressed."""
    ctx_dir = make_work(tmp_path / "w")
    body = "".join(f"def handler_{i}(request):\n    return 'an unmistakable line {i:04d}'\n\n\n"
                   for i in range(400))
    write(ctx_dir.parent, {"app/views.py": body})
    ctx(ctx_dir, "index")
    code = ctx_dir / "index" / "code.sqlite"
    conn = sqlite3.connect(code)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    raw = b"".join(p.read_bytes() for p in code.parent.glob("code.sqlite*"))
    assert b"return 'an unmistakable line 0123'" not in raw  # its terms are, one by one
    assert query(ctx_dir, "SELECT count(*) FROM chunks WHERE path = 'app/views.py'") == [(400,)]
    assert query(ctx_dir, "SELECT text FROM chunks WHERE qualname LIKE '%handler_123'") == [
        ("def handler_123(request):\n    return 'an unmistakable line 0123'\n",)]


def test_a_damaged_file_text_is_named_and_the_next_index_mends_it(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"a.py": "def a():\n    return 1\n"})
    ctx(ctx_dir, "index")
    conn = sqlite3.connect(ctx_dir / "index" / "code.sqlite")
    conn.execute("UPDATE file_text SET data = x'00ff'")
    conn.commit()
    conn.close()
    with (ctx_dir.parent / "a.py").open("a") as fh:
        fh.write("def b():\n    return 2\n")
    argv = ["--ctx-dir", str(ctx_dir), "index"]
    res = run_ctx(argv, cwd=ctx_dir.parent)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "error[E007]" in res.stderr and "the indexed text of a.py is unreadable" in res.stderr
    assert "hint: run `ctx index`" in res.stderr
    again = run_ctx(argv, cwd=ctx_dir.parent)  # drops the damaged code index, indexes anew
    assert again.returncode == 0, again.stderr
    assert "the code index was damaged" in again.stderr
    assert query(ctx_dir, "SELECT qualname, text FROM chunks ORDER BY start_line") == [
        ("a.a", "def a():\n    return 1\n"), ("a.b", "def b():\n    return 2\n")]


def test_a_pack_that_meets_a_damaged_file_text_says_so_and_the_code_index_is_dropped(
        tmp_path: Path) -> None:
    """A read that meets a stored text that does not decompress fails with E007 naming the code
    index (not an internal error), leaves the main index alone, and the next command drops the
    code index; ``ctx index`` then makes it again."""
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"net.py": "def retry_request(backoff):\n    return backoff * 2\n"})
    ctx(ctx_dir, "index")
    conn = sqlite3.connect(ctx_dir / "index" / "code.sqlite")
    conn.execute("UPDATE file_text SET data = x'00112233'")
    conn.commit()
    conn.close()
    base = ["--ctx-dir", str(ctx_dir)]
    res = run_ctx([*base, "pack", "retry request backoff"], cwd=ctx_dir.parent)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("ctx: error[E007]: the code index is corrupt: a file's stored "
                                 "text does not decompress")
    assert not (ctx_dir / "index" / "index.sqlite-damaged").exists()  # the main index is sound
    after = run_ctx([*base, "pack", "retry request backoff", "--format", "json"],
                    cwd=ctx_dir.parent)
    assert after.returncode == 0, after.stderr
    assert "the code index was damaged" in after.stderr and "run `ctx index`" in after.stderr
    assert "rebuilt from the store" not in after.stderr  # the main index is not rebuilt for nothing
    assert json.loads(after.stdout)["retrieved"] == []
    ctx(ctx_dir, "index")
    mended = run_ctx([*base, "pack", "retry request backoff", "--format", "json"],
                     cwd=ctx_dir.parent)
    assert mended.returncode == 0, mended.stderr
    assert "def retry_request(backoff)" in mended.stdout


def test_a_stored_text_is_never_inflated_past_its_file_size() -> None:
    """A forged ``file_text`` (a small row that inflates to gigabytes) is refused, not read."""
    import zlib

    import pytest

    bomb = zlib.compress(b"x" * 50_000_000, 9)  # 49 KB that inflate to 50 MB
    assert len(bomb) < 100_000
    with pytest.raises(zlib.error):
        unpack_lines(bomb, 20)
    with pytest.raises(zlib.error):  # shorter than indexed: not the text either
        unpack_lines(pack_text("def a():\n    return 1\n"), 1000)
    assert unpack_lines(pack_text("a\nb"), 3) == ["a\n", "b"]
