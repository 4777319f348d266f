"""Library pieces of `ctx llm`: the prompt budget, the server choice, mentions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.errors import ConfigInvalid, InvalidInput
from ctxstore.llm.client import is_loopback, resolve_server, served_model
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
    settings = call_settings(store.config, "http://127.0.0.1:7", total_budget=900, max_tokens=500,
                             model="m", temperature=0.5, timeout=3)
    assert (settings.budget, settings.model, settings.temperature, settings.timeout) == \
        (400, "m", 0.5, 3)
    # a budget the answer alone takes up: said as such, not as "over the budget of 1" later
    with pytest.raises(InvalidInput, match="budget of 100 tokens leaves no room for a prompt "
                                           "beside 500 tokens for the answer"):
        call_settings(store.config, "http://127.0.0.1:7", total_budget=100, max_tokens=500)


@pytest.mark.parametrize(("given", "base"), [
    ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434"),
    ("http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434"),
    ("http://h:1/api/v1", "http://h:1/api"),
    ("http://h:1/v1x", "http://h:1/v1x"),
    ("http://h:1/", "http://h:1"),
])
def test_resolve_server_strips_the_openai_v1_suffix(given: str, base: str) -> None:
    for where in ({"flag": given, "env": None}, {"flag": None, "env": given}):
        pick = resolve_server(**where, project="http://127.0.0.1:8080", project_is_own=True,
                              user=None)
        assert pick.url == base
    pick = resolve_server(flag=None, env=None, project=given, project_is_own=True, user=None)
    assert pick.url == base
    pick = resolve_server(flag=None, env=None, project="http://127.0.0.1:8080",
                          project_is_own=True, user=given)
    assert pick.url == base


def test_resolve_server_refuses_an_empty_flag() -> None:
    with pytest.raises(InvalidInput, match="--server: '' is not"):
        resolve_server(flag="", env="http://127.0.0.1:5", project="http://127.0.0.1:8080",
                       project_is_own=True, user=None)
    # the default written with /v1 is still the default
    pick = resolve_server(flag=None, env=None, project="http://127.0.0.1:8080/v1",
                          project_is_own=False, user=None)
    assert pick.source == "default"


@pytest.mark.parametrize(("props", "name"), [
    ({"model_path": "/models/qwen2.5-7b.gguf"}, "qwen2.5-7b.gguf"),
    ({"model_path": "C:\\models\\phi-3.gguf"}, "phi-3.gguf"),
    ({"model_path": "plain.gguf"}, "plain.gguf"),
    ({"model_path": ""}, None), ({"model_path": 3}, None), ({}, None), (None, None),
])
def test_served_model_is_the_model_file_name(props: dict[str, object] | None,
                                             name: str | None) -> None:
    assert served_model(props) == name  # type: ignore[arg-type]


@pytest.mark.parametrize("option", ["temperature", "timeout"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_call_settings_refuses_non_finite_numbers(option: str, value: float) -> None:
    from ctxstore.config import Config
    from ctxstore.llm.ask import call_settings

    with pytest.raises(InvalidInput, match=f"--{option}: .* is not a finite number"):
        call_settings(Config(), "http://127.0.0.1:7", total_budget=1000, **{option: value})
