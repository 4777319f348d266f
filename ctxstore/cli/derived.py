"""``ctx debug graph`` and ``ctx debug index``: the derived structures, as they are.

Registered on the ``debug`` group by ``ctxstore.cli.debug``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.errors import InvalidInput
from ctxstore.knowledge.graph import graph_export, index_lookup, scc_report

if TYPE_CHECKING:
    from ctxstore.knowledge.graph import NamedEdge, SccReport

__all__ = ["graph_command", "index_command"]


def _dot_id(text: str) -> str:
    return json.dumps(text)  # a double-quoted DOT ID: JSON escaping is a subset of it


def _print_notices(notices: list[str]) -> None:
    for notice in notices:
        click.echo(f"ctx: {notice}", err=True)


@click.command("graph")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "dot"]), default=None,
              help="text (default), json, or dot (Graphviz).")
@click.option("--scc", "show_scc", is_flag=True,
              help="Print the condensation DAG: each SCC with its members, and the edges between SCCs.")
@click.option("--cycles", is_flag=True,
              help="List only the non-trivial SCCs (import cycles, mutual recursion).")
@pass_env
def graph_command(env: Env, fmt: str | None, show_scc: bool, cycles: bool) -> None:
    """Export the relationship graph (knowledge edges and code edges at HEAD and STAGE).

    The SCC view (.ctx/DERIVED/scc_latest) is used when current, else rebuilt; a stale or
    damaged pointer is named on stderr and rebuilt.

    \b
    Examples:
        ctx debug graph --format dot | dot -Tsvg > graph.svg
        ctx debug graph --cycles
        ctx debug graph --scc --format json
    """
    fmt = fmt or env.fmt
    if fmt not in ("text", "json", "dot"):
        raise InvalidInput(f"--format {fmt} is not available here (text, json or dot)")
    env.index()  # brought up to date, with progress on a terminal
    if not (show_scc or cycles):
        _print_edges(graph_export(env.session()), fmt)
        return
    report = scc_report(env.session())
    _print_notices(report.notices)
    if cycles:
        _print_cycles(report, fmt)
    else:
        _print_dag(report, fmt)


def _print_edges(edges: list[NamedEdge], fmt: str) -> None:
    if fmt == "json":
        nodes = sorted({e.source for e in edges} | {e.target for e in edges})
        emit_json({"nodes": nodes, "edges": [
            {"from": e.source, "to": e.target, "label": e.label} for e in edges]})
    elif fmt == "dot":
        click.echo("digraph ctx {")
        for e in edges:
            click.echo(f"  {_dot_id(e.source)} -> {_dot_id(e.target)} [label={_dot_id(e.label)}];")
        click.echo("}")
    else:
        for e in edges:
            click.echo(f"{e.source} -{e.label}-> {e.target}")
        click.echo(f"{len(edges)} edges")


def _print_cycles(report: SccReport, fmt: str) -> None:
    found = report.cycles
    if fmt == "json":
        emit_json({"scc_view": report.oid, "cycles": found})
    elif fmt == "dot":
        click.echo("digraph cycles {")
        for i, members in enumerate(found):
            click.echo(f"  subgraph cluster_{i} {{")
            click.echo(f"    label={_dot_id(f'cycle {i + 1}')};")
            for member in members:
                click.echo(f"    {_dot_id(member)};")
            click.echo("  }")
        click.echo("}")
    else:
        for i, members in enumerate(found, 1):
            click.echo(f"cycle {i} ({len(members)} members): {' '.join(members)}")
        click.echo(f"{len(found)} cycles among {report.node_count} nodes")


def _print_dag(report: SccReport, fmt: str) -> None:
    groups, pairs, oid = report.groups, report.dag, report.oid
    if fmt == "json":
        emit_json({"scc_view": oid, "heads": report.heads,
                   "sccs": [{"id": i, "members": m} for i, m in enumerate(groups)],
                   "dag": [list(p) for p in pairs]})
    elif fmt == "dot":
        click.echo("digraph scc {")
        for i, m in enumerate(groups):
            label = m[0] if len(m) == 1 else f"{m[0]} (+{len(m) - 1})"
            click.echo(f"  s{i} [label={_dot_id(label)}];")
        for a, b in pairs:
            click.echo(f"  s{a} -> s{b};")
        click.echo("}")
    else:
        for i, m in enumerate(groups):
            click.echo(f"scc {i}: {' '.join(m)}")
        for a, b in pairs:
            click.echo(f"scc {a} -> scc {b}")
        click.echo(f"{len(groups)} SCCs (topological order), {len(pairs)} DAG edges, "
                   f"view {oid[:16]}")


@click.command("index")
@click.argument("key")
@format_option
@pass_env
def index_command(env: Env, key: str) -> None:
    """Show what each index holds for KEY: path, name and stable-key indexes, adjacency.

    KEY is a path (src/a.py), a qualified name (pkg.mod.func), a node id (or a unique
    prefix), an endpoint written kind:key (module:os), or a name-index query
    name:<namespace>:<name> (namespaces module, item, package, or a node type).

    \b
    Examples:
        ctx debug index src/app.py
        ctx debug index name:item:connect --format json
    """
    env.index()  # brought up to date, with progress on a terminal
    answer = index_lookup(env.session(), key)
    kind, value, found = answer.kind, answer.value, answer.found
    if env.fmt == "json":
        emit_json(found.to_json())
        return
    click.echo(f"key: {kind} {value}")
    if kind == "file":
        p = found.path
        click.echo("path index: " + (f"{p['path']} version {p['version'][:16].lower()} blob "
                                     f"{p['blob'][:16].lower()} {p['language'] or '-'} "
                                     f"{p['line_count']} lines" if p else "(not indexed)"))
    for title, rows in (("name index", found.names), ("stable key index", found.stable)):
        if rows or kind.startswith("name:") or kind in ("module", "item"):
            click.echo(f"{title}: {len(rows)}")
            for row in rows:
                click.echo("  " + " ".join(f"{k}={v}" for k, v in row.items() if v is not None))
    if kind.startswith("name:"):
        return
    for title, rows, arrow in (("forward", found.forward, "->"), ("backward", found.backward, "<-")):
        click.echo(f"adjacency {title}: {len(rows)}")
        for row in rows:
            click.echo(f"  {row['label']} {arrow} {row['kind']}:{row['key']}  [{row['source']}]")
