"""`ctx search --global`: the ranked any-text search over the project store and the user store
~/.ctx (HOME is a temporary directory), each result labelled by store (issues 14, 16)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
from conftest import run_ctx, store_digest


def _project(tmp_path: Path) -> Path:
    work = tmp_path / "proj"
    work.mkdir()
    assert run_ctx(["init"], cwd=work).returncode == 0
    return work


@pytest.mark.slow
def test_search_global_finds_a_user_store_node_by_free_text(tmp_path: Path) -> None:
    work = _project(tmp_path)
    mine = run_ctx(["add", "--type", "fact", "--tag", "tier:reference",
                    "the deploy script retries three times"], cwd=work).stdout.strip()
    user = run_ctx(["add", "--global", "--type", "fact", "--tag", "tier:reference",
                    "I prefer Neovim as my editor, with tabs of 4 spaces"], cwd=work).stdout.strip()
    assert (Path(os.environ["HOME"]) / ".ctx" / "HEAD").is_file()
    # A question with punctuation; only some of its words are in the node.
    res = run_ctx(["--format", "json", "search", "--global",
                   'which "editor" do I use?? (vim/neovim) -- && *'], cwd=work)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert [(n["store"], n["id"]) for n in out["nodes"]] == [("user", user)]
    assert "editor" in out["nodes"][0]["matched"] and out["nodes"][0]["score"] >= 0
    both = json.loads(run_ctx(["--format", "json", "search", "--global", "retries editor"],
                              cwd=work).stdout)
    assert {(n["store"], n["id"]) for n in both["nodes"]} == {("project", mine), ("user", user)}
    # Without --global the user store is not read; the text output names the store.
    alone = json.loads(run_ctx(["--format", "json", "search", "editor"], cwd=work).stdout)
    assert alone["nodes"] == []
    text = run_ctx(["search", "--global", "neovim"], cwd=work).stdout
    assert text.startswith("user ") and user in text


def test_search_global_odd_text_and_code_kinds(tmp_path: Path) -> None:
    work = _project(tmp_path)
    run_ctx(["add", "--global", "--type", "fact", "I like sqlite"], cwd=work)
    before = store_digest(work / ".ctx")
    empty = run_ctx(["--format", "json", "search", "--global", "?!() -- * \"\""], cwd=work)
    assert empty.returncode == 0 and json.loads(empty.stdout)["nodes"] == []
    code = run_ctx(["search", "--global", "--kind", "symbol", "sqlite"], cwd=work)
    assert code.returncode == 1 and code.stdout == ""
    assert code.stderr.startswith("ctx: error[E011]: --global searches nodes, narrative and "
                                  "command runs, not chunks or symbols")
    assert len(code.stderr.strip().splitlines()) == 1
    nodes = run_ctx(["--format", "json", "search", "--global", "--kind", "node", "--kind",
                     "symbol", "sqlite"], cwd=work)
    assert [n["store"] for n in json.loads(nodes.stdout)["nodes"]] == ["user"]
    assert store_digest(work / ".ctx") == before


@pytest.mark.slow
def test_pack_global_takes_relevant_memory_from_the_user_store(tmp_path: Path) -> None:
    """`ctx pack --global` (the global layer for packs): user-store nodes join the pack, labelled."""
    work = _project(tmp_path)
    (work / "deploy.py").write_text('"""Deploy the service."""\n\ndef deploy(retries: int) -> None:\n'
                                    '    """Push the build; retried on failure."""\n')
    assert run_ctx(["index"], cwd=work).returncode == 0
    user = run_ctx(["add", "--global", "--type", "decision",
                    "Deploys always pin the base image digest"], cwd=work).stdout.strip()

    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "pack.schema.json").read_text())

    def items(*flags: str) -> list[dict]:
        res = run_ctx(["pack", "how do deploys pin the image digest", "--format", "json", *flags],
                      cwd=work)
        assert res.returncode == 0, res.stderr
        pack = json.loads(res.stdout)
        jsonschema.validate(pack, schema)
        return pack["retrieved"]

    wide = [i for i in items("--global") if i.get("object_id") == user]
    assert len(wide) == 1 and wide[0]["why"]["store"] == "user", wide
    assert "(user store ~/.ctx)" in wide[0]["title"]
    assert not [i for i in items() if i.get("object_id") == user]
