"""``ctx view render --budget N``: the frame costs what it prints, so a node that fits is shown."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxstore.repo import Store
from ctxstore.tokens import estimate_tokens

NODES = ["We use SQLite in WAL mode for the index",
         "Retries back off exponentially, with jitter, up to 30 s; the client gives up after five",
         "ok"]


def _add(runner: CliRunner, store: Store, text: str, tag: str) -> str:
    r = invoke(runner, store, "add", "--type", "fact", "--tag", tag, text)
    assert r.exit_code == 0, r.output
    return r.stdout.strip()


def _render(runner: CliRunner, store: Store, budget: int, *more: str) -> tuple[int, str, str]:
    r = invoke(runner, store, "view", "render", "default", "--budget", str(budget), *more)
    return r.exit_code, r.stdout, r.stderr


def _alone(runner: CliRunner, store: Store, tag: str) -> int:
    """The tokens of a composition of the one node tagged ``tag``, its frame included."""
    r = invoke(runner, store, "compose", "--query", f"tag:{tag}", "--budget", "100000",
               "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["meta"]["node_count"] == 1
    return int(doc["meta"]["token_count"])


def test_view_render_shows_a_node_when_it_fits_with_its_frame(store: Store, runner: CliRunner
                                                              ) -> None:
    nid = _add(runner, store, NODES[0], "tier:reference")
    code, full, _ = _render(runner, store, 100000)
    cost = estimate_tokens(full)
    assert code == 0 and f":{nid[:8]}] {NODES[0]}" in full
    code, out, err = _render(runner, store, cost)  # exactly what the node and frame cost
    assert (code, out, err) == (0, full, "")
    assert out.startswith(f"<!-- ctx: 1 nodes, {cost} tokens, rendered at ")
    code, out, _ = _render(runner, store, cost - 1)  # one token short: the frame alone
    assert code == 0 and out.startswith("<!-- ctx: 0 nodes, ") and estimate_tokens(out) < cost
    doc = json.loads(_render(runner, store, cost, "--format", "json")[1])
    assert (doc["meta"]["node_count"], doc["meta"]["token_count"]) == (1, cost)


def test_view_render_below_the_frame_is_one_line(store: Store, runner: CliRunner) -> None:
    code, empty, _ = _render(runner, store, 100000)
    frame = estimate_tokens(empty)
    assert (code, empty.count("\n")) == (0, 3)
    assert _render(runner, store, frame)[:2] == (0, empty)
    code, out, err = _render(runner, store, frame - 1)
    assert (code, out) == (1, "")
    assert err == (f"ctx: error[E010]: budget {frame - 1} is below the {frame} tokens the frame "
                   "needs\n")


@pytest.fixture
def three(store: Store, runner: CliRunner) -> tuple[Store, list[int]]:
    """A store with three nodes of different sizes; each one's cost shown alone."""
    tiers = ["tier:pinned", "tier:reference", "tier:working"]
    for i, (text, tier) in enumerate(zip(NODES, tiers, strict=True)):
        _add(runner, store, text, tier)
        invoke(runner, store, "tag", _ids(runner, store)[text], f"t:n{i}")
    return store, [_alone(runner, store, f"t:n{i}") for i in range(len(NODES))]


def _ids(runner: CliRunner, store: Store) -> dict[str, str]:
    r = invoke(runner, store, "list", "--format", "json")
    return {n["content"]: n["id"] for n in json.loads(r.stdout)["nodes"]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=1, max_value=200))
def test_view_render_never_exceeds_its_budget_and_shows_a_node_that_fits(
        three: tuple[Store, list[int]], runner: CliRunner, budget: int) -> None:
    store, alone = three
    code, out, err = _render(runner, store, budget)
    if code != 0:  # below the frame of an empty composition
        assert (code, out) == (1, "") and err.startswith("ctx: error[E010]: ")
        assert budget < min(alone)
        return
    assert estimate_tokens(out) <= budget
    shown = int(out.split(" nodes, ", 1)[0].removeprefix("<!-- ctx: "))
    if min(alone) <= budget:
        assert shown >= 1, (budget, alone, out)
    if sum(alone) <= budget:  # each alone pays its own frame: together they fit too
        assert shown == len(NODES), (budget, alone, out)


def test_view_render_shows_a_node_from_the_smallest_budget_that_holds_one(
        three: tuple[Store, list[int]], runner: CliRunner) -> None:
    store, alone = three
    for budget in range(min(alone), min(alone) + 3):
        code, out, _ = _render(runner, store, budget)
        assert code == 0 and " 0 nodes, " not in out, (budget, out)


@pytest.mark.parametrize("command", [("view", "render", "default"), ("compose",),
                                     ("compose", "--global")])
@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_compose_at_a_budget_that_leaves_nodes_out_says_how_many_on_stderr(
        store: Store, runner: CliRunner, command: tuple[str, ...], fmt: str) -> None:
    _add(runner, store, NODES[0], "tier:reference")
    _add(runner, store, NODES[1], "tier:reference")
    r = invoke(runner, store, *command, "--budget", "100000", "--format", fmt)
    assert (r.exit_code, r.stderr) == (0, "")  # everything shown: no note
    r = invoke(runner, store, *command, "--budget", "30", "--format", fmt)
    assert r.exit_code == 0, r.output
    assert " 0 nodes, " in r.stdout or '"node_count": 0' in r.stdout
    assert r.stderr == ("ctx: note: 2 more nodes did not fit the budget of 30 tokens (a larger "
                        "--budget shows more)\n")
