"""``--output FILE`` of ``ctx pack`` and ``ctx export``: never into the store, written as `>` would.

Both commands write through one helper (``cli._common.write_output`` → ``fsio.write_output``).
No test here touches a real device: the FIFO branch is the same "open and write" path.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from conftest import invoke, store_digest

from ctxstore.repo import Store

COMMANDS = [pytest.param(["pack", "retry loop"], id="pack"), pytest.param(["export"], id="export")]
# What `ctx pack` says on stderr in a store with no code indexed (these tests index none).
NO_INDEX = "ctx: note: no code is indexed here, so the pack holds memory only; run `ctx index`\n"


def _quiet(r) -> bool:
    """Exit 0, nothing on stdout (it went to the file), no more than the no-index note."""
    return r.exit_code == 0 and r.stdout == "" and r.stderr in ("", NO_INDEX)


def _refused(runner, store: Store, args: list[str]) -> str:
    before = store_digest(store.root)
    head = (store.root / "HEAD").read_bytes()
    r = invoke(runner, store, *args)
    assert (r.exit_code, r.stdout) == (1, ""), (r.stdout, r.stderr)
    assert r.stderr.startswith("ctx: error[E011]: --output: ") and r.stderr.count("\n") == 1, \
        r.stderr
    assert store_digest(store.root) == before
    assert (store.root / "HEAD").read_bytes() == head
    return r.stderr


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("inside", ["HEAD", "pack.json", "objects/pack.json", "config.toml"])
def test_output_inside_the_store_is_refused(runner, store: Store, command: list[str],
                                            inside: str) -> None:
    target = store.root / inside
    line = _refused(runner, store, [*command, "--output", str(target)])
    assert line == (f"ctx: error[E011]: --output: refusing to write {target}: it is inside the "
                    f"store {store.root} (hint: write the output outside the .ctx/ directory)\n")
    assert inside in ("HEAD", "config.toml") or not target.exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_output_into_the_store_through_dotdot_or_a_symlink_is_refused(runner, store: Store,
                                                                      command: list[str]) -> None:
    work = store.root.parent
    (work / "sub").mkdir()
    _refused(runner, store, [*command, "--output", str(work / "sub" / ".." / ".ctx" / "HEAD")])
    _refused(runner, store, [*command, "-o", str(work / "sub" / ".." / ".ctx" / "new.json")])
    (work / "head-link").symlink_to(store.root / "HEAD")
    _refused(runner, store, [*command, "--output", str(work / "head-link")])
    assert (work / "head-link").is_symlink()
    (work / "store-link").symlink_to(store.root)
    _refused(runner, store, [*command, "--output", str(work / "store-link" / "x.json")])


@pytest.mark.parametrize("command", COMMANDS)
def test_output_empty_name_is_one_line(runner, store: Store, command: list[str]) -> None:
    assert _refused(runner, store, [*command, "--output", ""]) == (
        "ctx: error[E011]: --output: the output file name is empty "
        "(hint: name a file, or - for standard output)\n")


@pytest.mark.parametrize("command", COMMANDS)
def test_output_to_a_fifo_writes_into_it_and_keeps_it(runner, store: Store, tmp_path: Path,
                                                      command: list[str]) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)  # blocks forever if nothing opens it
    reader.start()
    r = invoke(runner, store, *command, "--output", str(fifo))
    assert _quiet(r), (r.exit_code, r.stdout, r.stderr)
    reader.join(timeout=20)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # not replaced by a regular file
    assert got and json.loads(got[0])["version"] == 1


@pytest.mark.parametrize("command", COMMANDS)
def test_output_through_a_symlink_writes_its_target(runner, store: Store, tmp_path: Path,
                                                    command: list[str]) -> None:
    target = tmp_path / "real.json"
    target.write_text("old\n")
    target.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    r = invoke(runner, store, *command, "--output", str(link))
    assert _quiet(r), (r.exit_code, r.stdout, r.stderr)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["version"] == 1
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600  # replaced, permissions kept
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "created.json")
    r = invoke(runner, store, *command, "-o", str(dangling))
    assert r.exit_code == 0, r.stderr
    assert dangling.is_symlink() and json.loads((tmp_path / "created.json").read_text())


@pytest.mark.parametrize("command", COMMANDS)
def test_output_name_that_is_not_utf8_is_a_file_name(runner, store: Store, tmp_path: Path,
                                                     command: list[str]) -> None:
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/out\xff.json")
    r = invoke(runner, store, *command, "--output", name)
    assert _quiet(r), (r.exit_code, r.stdout, r.stderr)
    assert json.loads((tmp_path / os.fsdecode(b"out\xff.json")).read_bytes())
    assert b"out\xff.json" in os.listdir(os.fsencode(str(tmp_path)))



@pytest.mark.parametrize("command", COMMANDS)
def test_output_inside_the_user_store_is_refused(runner, store: Store, command: list[str]) -> None:
    # --global reads ~/.ctx: its HEAD is no more an output file than the project's.
    user = Path(os.environ["HOME"]) / ".ctx"
    user.mkdir(parents=True, exist_ok=True)
    (user / "HEAD").write_text("ref: refs/main\n")
    line = _refused(runner, store, [*command, "--output", str(user / "HEAD")])
    assert f"it is inside the store {user}" in line
    assert (user / "HEAD").read_text() == "ref: refs/main\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_output_into_a_missing_directory_is_one_clear_line(runner, store: Store, command: list[str],
                                                           tmp_path: Path) -> None:
    target = tmp_path / "nodir" / "x.json"
    r = invoke(runner, store, *command, "--output", str(target))
    assert (r.exit_code, r.stdout) == (1, "")
    assert r.stderr.startswith(f"ctx: error[E011]: --output: cannot write {target}: the directory ")
    assert "does not exist" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "nodir").exists()
