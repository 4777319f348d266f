"""``ctx index`` of a few changed files patches the packs' corpus instead of reading every file.

The packs' ``corpus_cache`` value (``index.retrieval``) lists every indexed file with its
lengths and test flag. A run that changed a few files drops their entries and reads those
files' rows again; the result must be exactly what reading the whole file table gives (the
value ``ctx debug verify --index`` checks too), for written, added, removed and test files.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import session_of

from ctxstore.code.ingest import index_tree
from ctxstore.index import retrieval
from ctxstore.index.retrieval import (
    PACK_APART,
    code_generation,
    corpus_name,
    decode_corpus,
    encode_corpus,
)
from ctxstore.repo import Store


def _write(root: Path, files: dict[str, str]) -> None:
    past = time.time() - 10
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (past, past))


def _cached(store: Store) -> tuple[str, bytes]:
    conn = session_of(store).index()
    row = conn.execute("SELECT generation, data FROM corpus_cache WHERE name = ?",
                       (corpus_name(PACK_APART),)).fetchone()
    assert row is not None
    return str(row[0]), bytes(row[1])


def test_a_few_changed_files_patch_the_corpus_to_what_the_file_table_gives(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    root = store.root.parent
    _write(root, {f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(12)}
           | {"README.md": "# readme\n", "tests/test_m0.py": "def test_0():\n    pass\n"})
    index_tree(session_of(store), jobs=1)
    generation, _ = _cached(store)
    # Changed, added (a test file and a Markdown file: the other group), removed.
    _write(root, {"pkg/m3.py": "def f3():\n    return 'three times more words here'\n",
                  "tests/test_new.py": "def test_new():\n    pass\n", "docs/new.md": "# new\n"})
    (root / "pkg" / "m7.py").unlink()

    def whole_table(*args: object) -> object:
        raise AssertionError("the whole file table was read: the corpus was not patched")

    monkeypatch.setattr(retrieval, "read_corpus", whole_table)
    report = index_tree(session_of(store), jobs=1)
    assert sorted(report.written) == ["docs/new.md", "pkg/m3.py", "tests/test_new.py"]
    assert report.removed == ["pkg/m7.py"]
    monkeypatch.undo()
    conn = session_of(store).index()
    now, data = _cached(store)
    assert now == code_generation(conn) != generation
    want = retrieval.read_corpus(conn, PACK_APART)
    assert data == encode_corpus(want)  # byte for byte what reading every file gives
    assert decode_corpus(data) is not None
    assert "pkg/m7.py" not in want.paths and "tests/test_new.py" in want.paths
    assert [want.paths[i] for i in want.tests] == ["tests/test_m0.py", "tests/test_new.py"]


def test_a_corpus_value_out_of_id_order_is_read_again_whole(store: Store) -> None:
    """The patch puts entries back by id: a value whose group is not in id order (written by
    hand, or by another version) is not patched into a wrong one but read again."""
    root = store.root.parent
    _write(root, {f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(5)}
           | {"README.md": "# readme\n", "tests/test_m0.py": "def test_0():\n    pass\n"})
    index_tree(session_of(store), jobs=1)
    conn = session_of(store).index()
    want = retrieval.read_corpus(conn, PACK_APART)
    assert retrieval._patched(conn, want, {"pkg/m2.py"}) == want  # in order: patched in place
    n = want.split
    shuffled = retrieval.FileCorpus(want.ids[:n][::-1] + want.ids[n:], want.paths[:n][::-1]
                                    + want.paths[n:], want.body[:n][::-1] + want.body[n:],
                                    want.path_terms[:n][::-1] + want.path_terms[n:], n, [])
    assert retrieval._patched(conn, shuffled, {"pkg/m2.py"}) == want
