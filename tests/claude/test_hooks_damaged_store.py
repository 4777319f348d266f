"""A damaged store reaches the user through the hooks (issue 34 item 15).

Claude Code ignores the output of a hook that exits non-zero, so a hook that met a corrupt
store (E002, E003, E004) must still exit 0 with the damage named in ``systemMessage``:
before, it exited 1 and the message never reached anyone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import zstandard
from conftest import object_files, run_ctx

from ctxstore.model import ChangeBatch, Commit
from ctxstore.objects import KIND_BLOB
from ctxstore.repo import Store, open_store

DAMAGE = ("hash-mismatch", "garbage", "ref-names-blob", "ref-names-batch")
HOOKS = ("session-start", "stop")  # prompt-submit reports damage as a note of its own


def _damage(store: Store, kind: str) -> str:
    """Damage the store's head commit; returns the error code the hooks must name."""
    head = store.read_head().heads[0]
    if kind in ("hash-mismatch", "garbage"):
        data = (zstandard.ZstdCompressor().compress(b"CTXO1\x02" + (5).to_bytes(8, "little") + b"other")
                if kind == "hash-mismatch" else b"garbage")
        for path in object_files(store.root, head.hex()):
            path.chmod(0o644)
            path.write_bytes(data)
        return "E002" if kind == "hash-mismatch" else "E003"
    if kind == "ref-names-blob":
        target = next(oid for oid in store.objects.iter_ids()
                      if store.objects.read(oid).kind == KIND_BLOB)
    else:
        target = store.read_typed(head, Commit).change_batches[0]
        assert isinstance(store.read_typed(target), ChangeBatch)
    (store.root / "refs" / "main").write_text(target.hex() + "\n")
    return "E004"


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("damage", DAMAGE)
def test_hooks_on_a_corrupt_store_exit_0_with_the_damage_in_system_message(
        store: Store, damage: str, hook: str) -> None:
    run_ctx(["--ctx-dir", str(store.root), "add", "--type", "fact", "a fact"])
    run_ctx(["--ctx-dir", str(store.root), "commit", "-m", "one"])
    store = open_store(store.root)
    code = _damage(store, damage)
    shutil.rmtree(store.root / "index")  # the index would answer without reading the commit
    payload = {"session_id": "s", "cwd": str(store.worktree), "prompt": "a fact please",
               "source": "startup"}
    args = ["hook", hook] + (["--response", "<ctx:remember>x</ctx:remember>"] if hook == "stop" else [])
    res = run_ctx(args, stdin=json.dumps(payload), env={"CTX_DIR": str(store.root)}, timeout=30)
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    message = json.loads(res.stdout)["systemMessage"]
    assert code in message and "damaged" in message, message
    assert f"error[{code}]" in res.stderr


def test_hooks_corrupt_store_is_logged(store: Store, tmp_path: Path) -> None:
    run_ctx(["--ctx-dir", str(store.root), "add", "--type", "fact", "a fact"])
    _damage(open_store(store.root), "garbage")
    shutil.rmtree(store.root / "index")
    res = run_ctx(["hook", "session-start"], stdin=json.dumps({"cwd": str(store.worktree)}),
                  env={"CTX_DIR": str(store.root)})
    assert res.returncode == 0
    assert "E003" in (store.root / "local" / "hooks.log").read_text()
