"""``ctx debug graph`` and ``ctx debug index``: the derived structures, as they are.

Registered on the ``debug`` group by ``ctxstore.cli.debug``.
"""

from __future__ import annotations

import json
from typing import Any

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.errors import InvalidInput

__all__ = ["graph_command", "index_command"]

_ENDPOINT_KINDS = ("file", "module", "item", "node", "diagnostic", "package", "target", "crate")


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
    from ctxstore.index.derived import graph_edges

    fmt = fmt or env.fmt
    if fmt not in ("text", "json", "dot"):
        raise InvalidInput(f"--format {fmt} is not available here (text, json or dot)")
    conn = env.index()
    if not (show_scc or cycles):
        _print_edges(graph_edges(conn), fmt)
        return
    from ctxstore.graph.scc import current_scc

    found = current_scc(env.store(), conn)
    _print_notices(found.notices)
    assert found.view is not None and found.oid is not None
    if cycles:
        _print_cycles(found.view, found.oid.hex(), fmt)
    else:
        _print_dag(found.view, found.oid.hex(), fmt)


def _print_edges(edges: list[tuple[str, str, str, str, str]], fmt: str) -> None:
    from ctxstore.graph.scc import node_name

    if fmt == "json":
        nodes = sorted({node_name(a, b) for a, b, *_ in edges} | {node_name(c, d) for _, _, c, d, _ in edges})
        emit_json({"nodes": nodes, "edges": [
            {"from": node_name(a, b), "to": node_name(c, d), "label": label}
            for a, b, c, d, label in edges]})
    elif fmt == "dot":
        click.echo("digraph ctx {")
        for a, b, c, d, label in edges:
            click.echo(f"  {_dot_id(node_name(a, b))} -> {_dot_id(node_name(c, d))} "
                       f"[label={_dot_id(label)}];")
        click.echo("}")
    else:
        for a, b, c, d, label in edges:
            click.echo(f"{node_name(a, b)} -{label}-> {node_name(c, d)}")
        click.echo(f"{len(edges)} edges")


def _print_cycles(view: Any, oid: str, fmt: str) -> None:
    from ctxstore.graph.scc import cycles

    found = cycles(view)
    if fmt == "json":
        emit_json({"scc_view": oid, "cycles": found})
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
        click.echo(f"{len(found)} cycles among {len(view.nodes)} nodes")


def _print_dag(view: Any, oid: str, fmt: str) -> None:
    from ctxstore.graph.scc import members

    groups = members(view)
    pairs = list(zip(view.dag_from, view.dag_to, strict=True))
    if fmt == "json":
        emit_json({"scc_view": oid, "heads": [h.hex() for h in view.heads],
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


def _endpoint(conn: Any, key: str) -> tuple[str, str]:
    """KEY of ``ctx debug index`` as an endpoint (see its help)."""
    from ctxstore.index.derived import classify_key
    from ctxstore.index.read import resolve_node_id

    head, sep, rest = key.partition(":")
    if sep and head == "name":
        namespace, sep2, name = rest.partition(":")
        if not (sep2 and namespace and name):
            raise InvalidInput(f"{key!r}: write a name query as name:<namespace>:<name>")
        return f"name:{namespace}", name
    if sep and head in _ENDPOINT_KINDS and rest:
        return head, rest
    found = classify_key(conn, key)
    if found is not None:
        return found
    try:
        return "node", resolve_node_id(conn, key)
    except InvalidInput:
        raise InvalidInput(f"{key!r} is not an indexed path, qualified name or node id",
                           hint="try name:item:<name> or kind:key (file:, module:, item:)") from None


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
    from ctxstore.index.derived import lookup

    conn = env.index()
    kind, value = _endpoint(conn, key)
    found = lookup(conn, kind, value)
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
