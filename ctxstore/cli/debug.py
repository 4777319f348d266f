"""``ctx debug cat|history|refs|verify|state|secrets`` (and ``graph|index`` from ``cli.derived``)."""

from __future__ import annotations

import itertools
import sys
from typing import Any

import click

from ctxstore import refs
from ctxstore.cli._common import Env, emit_json, fmt_time, format_option, pass_env, progress_printer
from ctxstore.cli._render import commit_summary, object_json
from ctxstore.cli.derived import graph_command, index_command
from ctxstore.errors import CtxError
from ctxstore.history.rebuild import verify
from ctxstore.model import decode_typed
from ctxstore.objects import KIND_TYPED
from ctxstore.replay import replay, state_heads
from ctxstore.security.purge import find_secrets
from ctxstore.verify import iter_pointer_names


@click.group("debug")
def debug_group() -> None:
    """Inspect objects, history, pointers and integrity.

    \b
    Example:
        ctx debug verify
    """


debug_group.add_command(graph_command)
debug_group.add_command(index_command)


@debug_group.command("cat")
@click.argument("object_id")
@format_option
@pass_env
def cat_command(env: Env, object_id: str) -> None:
    """Print an object: typed objects as JSON, blobs as their raw bytes.

    OBJECT_ID is a full id or a unique prefix of at least 4 hex characters.

    \b
    Example:
        ctx debug cat 3fa9c2
    """
    store = env.store()
    oid = store.objects.resolve_prefix(object_id)
    stored = store.objects.read(oid)
    if stored.kind == KIND_TYPED:
        emit_json({"id": oid.hex(), "kind": "typed",
                   "object": object_json(decode_typed(stored.payload, oid=oid))})
    elif env.fmt == "json":
        emit_json({"id": oid.hex(), "kind": "blob", "size": len(stored.payload),
                   "text": stored.payload.decode("utf-8", "replace")})
    else:
        sys.stdout.buffer.write(stored.payload)
        sys.stdout.buffer.flush()


@debug_group.command("history")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="At most N entries.")
@format_option
@pass_env
def history_command(env: Env, limit: int | None) -> None:
    """Show every commit and work commit reachable from HEAD and STAGE, newest first.

    \b
    Example:
        ctx debug history --limit 20
    """
    store = env.store()
    entries = [commit_summary(oid, obj) for oid, obj in
               itertools.islice(store.iter_history(state_heads(store)), limit)]
    if env.fmt == "json":
        emit_json({"entries": entries})
        return
    for e in entries:
        kind = "commit" if e["type"] == "commit" else f"work:{e['step_kind']}"
        first = e["message"].splitlines()[0] if e["message"] else ""
        click.echo(f"{e['id'][:16]}  {fmt_time(e['time'])}  {kind:<20} {first}")


@debug_group.command("refs")
@format_option
@pass_env
def refs_command(env: Env) -> None:
    """Show HEAD, every ref and STAGE with the ids they hold.

    \b
    Example:
        ctx debug refs
    """
    store = env.store()
    rows: list[dict[str, Any]] = []
    for name in iter_pointer_names(store):
        if name == "HEAD":
            try:
                rows.append({"name": "HEAD", "target": refs.read_head_target(store.root),
                             "heads": [], "error": None})
            except CtxError as exc:
                rows.append({"name": "HEAD", "target": None, "heads": [], "error": str(exc)})
            continue
        try:
            ptr = refs.read_pointer(store.root, name)
            rows.append({"name": name, "target": None,
                         "heads": [h.hex() for h in ptr.heads] if ptr else [], "error": None})
        except CtxError as exc:
            rows.append({"name": name, "target": None, "heads": [], "error": str(exc)})
    if env.fmt == "json":
        emit_json({"refs": rows})
        return
    for row in rows:
        if row["error"]:
            click.echo(f"{row['name']:<12} ERROR {row['error']}")
        elif row["target"]:
            click.echo(f"{row['name']:<12} -> {row['target']}")
        else:
            note = "  (several heads from a Git merge)" if len(row["heads"]) > 1 else ""
            click.echo(f"{row['name']:<12} {' '.join(row['heads'])}{note}")


@debug_group.command("verify")
@click.option("--index", "check_index", is_flag=True,
              help="Also replay the store into a fresh index and compare the on-disk index "
                   "with it, table by table (read-only; `ctx rebuild` fixes a mismatch).")
@format_option
@pass_env
def verify_command(env: Env, check_index: bool) -> None:
    """Check every object, every pointer and that everything reachable exists.

    Each object must decompress, hash to its name and decode. Each problem on its own line; exit 3
    if any.

    \b
    Examples:
        ctx debug verify --format json
        ctx debug verify --index
    """
    res = verify(env.session(), index=check_index, progress=progress_printer("verify objects"))
    rep, cmp = res.store, res.index
    index_doc = {"tables": cmp.tables, "rows": cmp.rows, "ok": cmp.ok} if cmp is not None else None
    if env.fmt == "json":
        emit_json({"ok": rep.ok, "objects": rep.objects, "reachable": rep.reachable,
                   "pruned": rep.pruned,
                   **({"index": index_doc} if index_doc is not None else {}),
                   "problems": [{"severity": p.severity, "code": p.code, "subject": p.subject,
                                 "message": p.message} for p in rep.problems]})
    else:
        for p in rep.problems:
            click.echo(p.line())
        errors = sum(p.severity != "warning" for p in rep.problems)
        compared = f", index: {index_doc['tables']} tables, {index_doc['rows']} rows" \
            if index_doc is not None else ""
        pruned = (f", {rep.pruned} pruned (derived code index, rebuild with `ctx index`)"
                  if rep.pruned else "")
        click.echo(f"{rep.objects} objects, {rep.reachable} reachable{pruned}{compared}, "
                   f"{errors} problems" + ("" if errors else ": ok"))
    if not rep.ok:
        raise SystemExit(3)


@debug_group.command("state")
@format_option
@pass_env
def state_command(env: Env) -> None:
    """Replay the knowledge state from HEAD and STAGE and print it (or its digest).

    \b
    Example:
        ctx debug state --format json
    """
    state = replay(env.store())
    if env.fmt == "json":
        emit_json({"digest": state.digest(), "batches": state.batches, **state.to_json()})
        return
    click.echo(f"digest {state.digest()}")
    click.echo(f"{len(state.nodes)} nodes, {len(state.edges)} edges, {len(state.views)} views, "
               f"{len(state.winners)} keys, from {state.batches} change batches")
    for node in sorted(state.nodes.values(), key=lambda n: n.id):
        text = (node.content or "<blob>").splitlines()[0][:60] if (node.content or "") else "<blob>"
        click.echo(f"  {node.id}  {node.type:<13} {text}")


@debug_group.command("secrets")
@format_option
@pass_env
def secrets_command(env: Env) -> None:
    """Scan the whole store for secrets (objects, narrative, local state).

    What is scanned: every object any pointer reaches, the narrative Markdown and this
    clone's local state (transcript memory, hook state, the index). Each finding names
    its rule and where it is: the object, the node, the file and the commit that added
    it. Exit status 1 when something was found. `ctx purge ID` removes a node's or an
    object's content from the history (docs/security.md).

    \b
    Examples:
        ctx debug secrets
        ctx debug secrets --format json
    """
    store = env.store()
    report = find_secrets(store, progress=progress_printer("scanning objects"))
    if env.fmt == "json":
        emit_json({"version": 1, "objects": report.objects, "files": report.files,
                   "findings": [f.to_json() for f in report.findings]})
    else:
        for f in report.findings:
            where = [f"{f.place}"]
            if f.object:
                where.append(f"object {f.object[:12]} ({f.kind})")
            if f.node:
                where.append(f"node {f.node}")
            if f.file:
                where.append(f"file {f.file}")
            if f.field:
                where.append(f"field {f.field}")
            if f.line:
                where.append(f"line {f.line}")
            if f.commit:
                where.append(f"commit {f.commit[:12]}")
            click.echo(f"{f.rule}: " + ", ".join(where))
        click.echo(f"{len(report.findings)} secrets found in {report.objects} objects and "
                   f"{report.files} files" if report.findings else
                   f"no secret found in {report.objects} objects and {report.files} files")
    if report.findings:
        sys.exit(1)
