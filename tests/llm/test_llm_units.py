"""Library pieces of `ctx llm`: the prompt budget, the server choice, mentions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.errors import ConfigInvalid, InvalidInput
from ctxstore.llm.client import is_loopback, resolve_server
from ctxstore.llm.prompt import Pack, PackItem, compose_prompt
from ctxstore.llm.respond import find_mentions, summary_line
from ctxstore.tokens import estimate_tokens


@given(sizes=st.lists(st.integers(0, 3000), max_size=12), notes=st.integers(0, 5000),
       budget=st.integers(1, 4000), pack_budget=st.one_of(st.none(), st.integers(0, 4000)))
def test_prompt_never_exceeds_its_budget(sizes: list[int], notes: int, budget: int,
                                         pack_budget: int | None) -> None:
    pack = Pack(task="do it", items=tuple(PackItem(f"File: f{i}.py", "x" * n)
                                          for i, n in enumerate(sizes)),
                recent_narrative="n" * notes, budget=pack_budget)
    limit = budget if pack_budget is None else min(budget, pack_budget)
    try:
        prompt = compose_prompt(pack, budget)
    except InvalidInput:
        return
    assert prompt.tokens <= limit
    assert estimate_tokens(prompt.text) == prompt.tokens
    assert len(prompt.included) + len(prompt.skipped) == len(sizes)


def test_prompt_fence_outlasts_backticks_in_a_snippet() -> None:
    pack = Pack(task="t", items=(PackItem("File: a.md", "````\nend\n````"),),
                recent_narrative="", budget=None)
    assert "`````\n````\nend\n````\n`````" in compose_prompt(pack, 10_000).body


def test_prompt_prefix_hash_ignores_recent_notes() -> None:
    base = Pack(task="t", items=(PackItem("File: a.py", "x"),), recent_narrative="", budget=None)
    other = Pack(task="t", items=base.items, recent_narrative="n" * 1000, budget=None)
    assert compose_prompt(base, 10_000).prefix_hash == compose_prompt(other, 10_000).prefix_hash


@pytest.mark.parametrize(("url", "local"), [
    ("http://127.0.0.1:8080", True), ("http://127.9.9.9", True), ("http://localhost:1", True),
    ("http://[::1]:8080", True), ("http://10.0.0.1", False), ("https://example.com", False),
    ("http://127.0.0.1.example.com", False), ("http://localhost.evil.example", False),
])
def test_is_loopback(url: str, local: bool) -> None:
    assert is_loopback(url) is local


def test_resolve_server_order_and_refusal() -> None:
    default = "http://127.0.0.1:8080"
    pick = resolve_server(flag=None, env=None, project=default, project_is_own=False, user=None)
    assert (pick.url, pick.source) == (default, "default")
    pick = resolve_server(flag=None, env=None, project=default, project_is_own=False,
                          user="http://gpu.example:8000/")
    assert (pick.url, pick.source) == ("http://gpu.example:8000", "user-config")
    pick = resolve_server(flag=None, env=None, project="http://gpu.example:1",
                          project_is_own=True, user=None)
    assert pick.source == "project-config"
    with pytest.raises(ConfigInvalid):
        resolve_server(flag=None, env=None, project="http://gpu.example:1", project_is_own=False,
                       user="http://127.0.0.1:9")
    pick = resolve_server(flag=None, env="http://127.0.0.1:5", project="http://gpu.example:1",
                          project_is_own=False, user=None)
    assert (pick.url, pick.source) == ("http://127.0.0.1:5", "env")
    for bad in ("ftp://x", "http://", "http://u:p@h", "http://h:99999", "http://h/?q=1"):
        with pytest.raises(InvalidInput):
            resolve_server(flag=bad, env=None, project=default, project_is_own=True, user=None)


def test_mentions_and_summary(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x")
    pack = Pack(task="t", items=(PackItem("Symbol: pkg.mod.run (pkg/mod.py:1-2)", "x",
                                          path="pkg/mod.py", symbol="pkg.mod.run"),),
                recent_narrative="", budget=None, symbols=("pkg.mod",))
    text = "# Fix `run()`\nEdit ./pkg/mod.py:12 and pkg/mod.pyc; pkg.mod.runner is unrelated."
    found = [(m.kind, m.key) for m in find_mentions(text, pack, tmp_path)]
    assert found == [("item", "pkg.mod.run"), ("file", "pkg/mod.py")]
    assert summary_line(text) == "Fix `run()`"
    assert summary_line("\n```\ncode\n```") == "code"


def test_choose_server_reads_the_store_and_the_users_config(tmp_path: Path) -> None:
    import subprocess

    from ctxstore.init import init_store
    from ctxstore.llm.ask import call_settings, choose_server
    from ctxstore.repo import open_store

    clone, home = tmp_path / "clone", tmp_path / "home"
    clone.mkdir()
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    init_store(clone / ".ctx", git=False)
    store = open_store(clone / ".ctx")
    (home / ".ctx").mkdir(parents=True)
    (home / ".ctx" / "config.toml").write_text('[llm]\nserver_url = "http://gpu.example:8000"\n')
    pick = choose_server(store, flag=None, env_server=None, home=home, user_store=False)
    assert (pick.url, pick.source) == ("http://gpu.example:8000", "user-config")
    # the user store's own config is not read twice as "the user's"; a flag skips it
    pick = choose_server(store, flag=None, env_server=None, home=home, user_store=True)
    assert pick.source == "default"
    (home / ".ctx" / "config.toml").write_text("not [ toml")
    assert choose_server(store, flag="http://127.0.0.1:7", env_server=None, home=home,
                         user_store=False).source == "flag"
    # a clone's committed config may not name a remote server; the user's own store may
    (clone / ".ctx" / "config.toml").write_text('[llm]\nserver_url = "http://203.0.113.9:1"\n'
                                                "max_response_tokens = 300\n")
    store = open_store(clone / ".ctx")
    with pytest.raises(ConfigInvalid):
        choose_server(store, flag=None, env_server=None, home=home, user_store=False)
    assert choose_server(store, flag=None, env_server=None, home=home,
                         user_store=True).source == "project-config"
    settings = call_settings(store.config, "http://127.0.0.1:7", total_budget=1000)
    assert (settings.max_tokens, settings.budget) == (300, 700)
    settings = call_settings(store.config, "http://127.0.0.1:7", total_budget=100, max_tokens=500,
                             model="m", temperature=0.5, timeout=3)
    assert (settings.budget, settings.model, settings.temperature, settings.timeout) == (1, "m", 0.5, 3)
