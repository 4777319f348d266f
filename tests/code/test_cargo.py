"""``ctx add cargo``: the real cargo on a real workspace, recorded metadata for edge cases.

The real ``cargo`` is required: when it is missing and we are root, the fixture installs
Debian's package (``_cargolib``); the tests skip, saying so, only when it is absent and
cannot be installed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _cargolib import cargo_environment
from _ingestlib import ctx, ctx_json, make_work, query, tree_snapshot
from conftest import store_digest

from ctxstore.code.cargo import parse_metadata
from ctxstore.gc import collect_garbage
from ctxstore.model.build import target_id
from ctxstore.repo import open_store

FIXTURES = Path(__file__).parent / "fixtures" / "build"
EDGE_SQL = ("SELECT label, from_kind, from_key, to_kind, to_key, confidence, tool FROM build_edges"
            " WHERE path LIKE 'cargo:%' ORDER BY 1, 2, 3, 4, 5")


@pytest.fixture(scope="module")
def cargo_vars() -> dict[str, str]:
    """The environment that runs the real cargo offline (installed here when missing)."""
    return cargo_environment()


@pytest.fixture()
def workspace(tmp_path: Path, cargo_vars: dict[str, str], monkeypatch: pytest.MonkeyPatch
              ) -> Path:
    """A Git work tree with a store and a Cargo workspace: `app` depends on `core` by path."""
    for var, value in cargo_vars.items():
        monkeypatch.setenv(var, value)
    root = tmp_path / "repo"
    make_work(root, use_git=True)
    (root / "Cargo.toml").write_text('[workspace]\nmembers = ["app", "core"]\nresolver = "2"\n')
    for args in (["--lib", "core"], ["app"]):
        res = subprocess.run([cargo_vars["CARGO"], "new", "--offline", "--vcs", "none", *args],
                             cwd=root, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
    with (root / "app" / "Cargo.toml").open("a") as f:
        f.write('core = { path = "../core" }\n')
    return root


def test_cargo_add_snapshots_a_real_workspace_with_edges(workspace: Path) -> None:
    ctx_dir = workspace / ".ctx"
    doc = ctx_json(ctx_dir, "add", "cargo")
    assert {k: doc[k] for k in ("workspace_root", "manifest_path", "packages", "members",
                                "targets", "dependencies", "edges", "replaced")} == {
        "workspace_root": ".", "manifest_path": "Cargo.toml", "packages": 2, "members": 2,
        "targets": 2, "dependencies": 1, "edges": 5, "replaced": False}
    app, core = "path+file://" + (workspace / "app").as_posix() + "#0.1.0", \
        "path+file://" + (workspace / "core").as_posix() + "#0.1.0"
    app_bin, core_lib = target_id(app, "app", "bin").hex(), target_id(core, "core", "lib").hex()
    assert query(ctx_dir, EDGE_SQL) == sorted([
        ("CrateFromTarget", "crate", "app@0.1.0/bin/app", "target", app_bin, "high", "cargo"),
        ("CrateFromTarget", "crate", "core@0.1.0/lib/core", "target", core_lib, "high", "cargo"),
        ("DependsOn", "package", app, "package", core, "high", "cargo"),
        ("TargetOf", "target", app_bin, "package", app, "high", "cargo"),
        ("TargetOf", "target", core_lib, "package", core, "high", "cargo"),
    ])
    (evidence,) = query(ctx_dir, "SELECT evidence FROM build_edges WHERE label = 'DependsOn'")
    ev = json.loads(evidence[0])
    assert ev["dep_kinds"] == [{"kind": "normal", "optional": False, "features": [],
                                "rename": None}]
    assert ev["blob"] == doc["snapshot"]
    assert query(ctx_dir, "SELECT name, manifest_path, member FROM packages ORDER BY name") == [
        ("app", "app/Cargo.toml", 1), ("core", "core/Cargo.toml", 1)]
    assert query(ctx_dir, "SELECT name, kind, src_path FROM targets ORDER BY name") == [
        ("app", "bin", "app/src/main.rs"), ("core", "lib", "core/src/lib.rs")]


def test_cargo_new_snapshot_replaces_the_old_and_rebuild_agrees(workspace: Path) -> None:
    ctx_dir = workspace / ".ctx"
    ctx(ctx_dir, "add", "cargo")
    # Drop the dependency and add a bench: the next snapshot replaces the edges as a unit.
    manifest = workspace / "app" / "Cargo.toml"
    manifest.write_text(manifest.read_text().replace('core = { path = "../core" }\n', ""))
    (workspace / "core" / "benches").mkdir()
    (workspace / "core" / "benches" / "speed.rs").write_text("fn main() {}\n")
    old = os.getcwd()
    os.chdir(workspace / "app")  # from a member: still the workspace's snapshot
    try:
        from click.testing import CliRunner

        from ctxstore.cli import cli

        res = CliRunner().invoke(cli, ["--ctx-dir", str(ctx_dir), "--format", "json", "add",
                                       "cargo"])
    finally:
        os.chdir(old)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert (doc["workspace_root"], doc["replaced"], doc["dependencies"]) == (".", True, 0)
    rows = query(ctx_dir, EDGE_SQL)
    assert [r[0] for r in rows].count("DependsOn") == 0
    assert {r[2] for r in rows if r[0] == "CrateFromTarget"} == {
        "app@0.1.0/bin/app", "core@0.1.0/lib/core", "core@0.1.0/bench/speed"}
    assert query(ctx_dir, "SELECT COUNT(*) FROM versions WHERE kind = 'cargo'") == [(2,)]
    before = {t: query(ctx_dir, f"SELECT * FROM {t} ORDER BY 1, 2") for t in
              ("packages", "targets", "crates")}
    ctx(ctx_dir, "commit", "-m", "cargo")
    collect_garbage(open_store(ctx_dir), keep_days=0)  # the snapshot stays reachable
    ctx(ctx_dir, "rebuild")
    assert query(ctx_dir, EDGE_SQL) == rows
    assert {t: query(ctx_dir, f"SELECT * FROM {t} ORDER BY 1, 2") for t in before} == before
    assert ctx_json(ctx_dir, "debug", "verify")["ok"] is True


def test_cargo_metadata_file_is_read_instead_of_running_cargo(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    ctx_dir = make_work(tmp_path / "r")
    monkeypatch.setenv("CARGO", "/nonexistent/cargo")  # would fail if it were run
    doc = ctx_json(ctx_dir, "add", "cargo", "--metadata",
                   str(FIXTURES / "cargo_metadata_edge_cases.json"))
    assert (doc["packages"], doc["targets"], doc["dependencies"]) == (3, 6, 4)
    # Recorded elsewhere (/tmp/fx/ws): paths outside this repository stay as cargo wrote them.
    assert doc["workspace_root"] == "/tmp/fx/ws"


def _edge_case_snapshot():  # type: ignore[no-untyped-def]
    doc = json.loads((FIXTURES / "cargo_metadata_edge_cases.json").read_text())
    return parse_metadata(doc, repo_root="/tmp/fx/ws", created_at=1)


def test_cargo_recorded_metadata_target_kinds() -> None:
    snap = _edge_case_snapshot()
    assert (snap.workspace_root, snap.manifest_path) == (".", "Cargo.toml")
    kinds = {(p.name, t.name): (t.kind, t.src_path, t.crate_types)
             for p in snap.packages for t in p.targets}
    assert kinds == {
        ("app", "app"): ("bin", "app/src/main.rs", ("bin",)),
        ("app", "build-script-build"): ("custom_build", "app/build.rs", ("bin",)),
        ("core-lib", "core_lib"): ("lib", "core/src/lib.rs", ("lib",)),
        ("core-lib", "demo"): ("example", "core/examples/demo.rs", ("bin",)),
        ("core-lib", "speed"): ("bench", "core/benches/speed.rs", ("bin",)),
        ("macros", "macros"): ("proc_macro", "macros/src/lib.rs", ("proc-macro",)),
    }
    assert all(p.member for p in snap.packages)


def test_cargo_recorded_metadata_renamed_optional_and_kinded_dependencies() -> None:
    snap = _edge_case_snapshot()
    name = {p.package_id: p.name for p in snap.packages}
    deps = sorted((name[d.from_package_id], name[d.to_package_id], d.dep_kind, d.optional,
                   d.features_enabled, d.rename) for d in snap.resolve)
    assert deps == [
        ("app", "core-lib", "normal", False, ("fancy",), "corelib"),  # renamed, with a feature
        ("app", "macros", "build", False, (), None),
        ("app", "macros", "dev", False, (), None),
        ("core-lib", "macros", "normal", True, (), None),  # optional, enabled by `fancy`
    ]


def test_cargo_metadata_without_resolve_uses_declared_dependencies() -> None:
    doc = json.loads((FIXTURES / "cargo_metadata_edge_cases.json").read_text())
    doc["resolve"] = None  # what `cargo metadata --no-deps` prints
    snap = parse_metadata(doc, repo_root="/tmp/fx/ws", created_at=1)
    name = {p.package_id: p.name for p in snap.packages}
    assert sorted((name[d.from_package_id], name[d.to_package_id], d.dep_kind)
                  for d in snap.resolve) == [
        ("app", "core-lib", "normal"), ("app", "macros", "build"), ("app", "macros", "dev"),
        ("core-lib", "macros", "normal")]


@pytest.mark.parametrize("setup,args,message", [
    ("missing", ["--metadata", "{tmp}/nope.json"], "--metadata: no such file: {tmp}/nope.json"),
    ("fifo", ["--metadata", "{tmp}/fifo"], "--metadata: {tmp}/fifo is a FIFO, not a regular file"),
    ("garbage", ["--metadata", "{tmp}/bad.json"], "--metadata: {tmp}/bad.json is not JSON"),
    ("wrong", ["--metadata", "{tmp}/wrong.json"],
     "not the JSON of `cargo metadata --format-version 1`"),
    ("none", ["--manifest-path", "{tmp}/Cargo.toml"], "no Cargo.toml at {tmp}/Cargo.toml"),
    ("nocargo", [], "cannot run '/nonexistent/cargo': No such file or directory"),
])
def test_cargo_bad_input_is_one_clear_line_and_changes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str, args: list[str],
        message: str) -> None:
    root = tmp_path / "r"
    ctx_dir = make_work(root)
    tmp = tmp_path.as_posix()
    if setup == "fifo":
        os.mkfifo(tmp_path / "fifo")
    (tmp_path / "bad.json").write_bytes(b"\xff{not json")
    (tmp_path / "wrong.json").write_text('{"packages": 3}')
    if setup == "nocargo":
        (root / "Cargo.toml").write_text('[package]\nname = "x"\nversion = "0.1.0"\n')
        monkeypatch.setenv("CARGO", "/nonexistent/cargo")
    before, files = store_digest(ctx_dir), tree_snapshot(root)
    out, err, code = ctx(ctx_dir, "add", "cargo", *[a.format(tmp=tmp) for a in args], ok=False)
    assert (code, out) == (1, "")
    assert err.startswith("ctx: error[E011]: " + message.format(tmp=tmp)), err
    assert len(err.strip().splitlines()) == 1
    assert store_digest(ctx_dir) == before and tree_snapshot(root) == files


NO_LOCK_NOTE = ("ctx: note: Cargo.lock is {} and ctx does not let cargo write it: the snapshot "
                "holds the workspace's own packages and their declared dependencies, no resolved "
                "graph (run `cargo generate-lockfile` for it)\n")


@pytest.fixture()
def tiny(tmp_path: Path, cargo_vars: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace of two packages, no dependencies outside it: `app` may use `core`.

    The dependency is optional and not enabled, so the resolved graph has no edge and the
    declared dependencies (``--no-deps``) have one: which of the two a snapshot used shows.
    """
    for var, value in cargo_vars.items():
        monkeypatch.setenv(var, value)
    root = tmp_path / "tiny"
    make_work(root)
    (root / "Cargo.toml").write_text('[workspace]\nmembers = ["app", "core"]\nresolver = "2"\n')
    for rel, text in {"core/Cargo.toml": '[package]\nname = "core"\nversion = "0.1.0"\n',
                      "core/src/lib.rs": "pub fn f() {}\n",
                      "app/Cargo.toml": ('[package]\nname = "app"\nversion = "0.1.0"\n\n'
                                         '[dependencies]\n'
                                         'core = { path = "../core", optional = true }\n'),
                      "app/src/main.rs": "fn main() {}\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _lock(root: Path) -> None:
    res = subprocess.run([os.environ["CARGO"], "generate-lockfile", "--offline"], cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_cargo_add_without_a_lock_file_leaves_the_work_tree_unchanged(tiny: Path) -> None:
    files = tree_snapshot(tiny)
    out, err, code = ctx(tiny / ".ctx", "--format", "json", "add", "cargo")
    assert (code, err) == (0, NO_LOCK_NOTE.format("missing"))
    assert not (tiny / "Cargo.lock").exists() and tree_snapshot(tiny) == files
    doc = json.loads(out)
    assert (doc["packages"], doc["dependencies"], doc["lock_problem"]) == (2, 1, "missing")
    (evidence,) = query(tiny / ".ctx", "SELECT evidence FROM build_edges WHERE label = 'DependsOn'")
    assert json.loads(evidence[0])["dep_kinds"][0]["optional"] is True  # as declared
    out, err, _ = ctx(tiny / ".ctx", "add", "cargo")  # text: the same note, once
    assert err == NO_LOCK_NOTE.format("missing") and out.startswith("cargo workspace .: ")


def test_cargo_add_with_a_lock_file_uses_the_resolved_graph_and_keeps_the_lock(tiny: Path
                                                                              ) -> None:
    _lock(tiny)
    files = tree_snapshot(tiny)
    out, err, code = ctx(tiny / ".ctx", "--format", "json", "add", "cargo")
    assert (code, err) == (0, "")
    assert tree_snapshot(tiny) == files  # Cargo.lock included, byte for byte
    doc = json.loads(out)
    # resolved: the optional dependency is not enabled, so no edge
    assert (doc["packages"], doc["dependencies"], doc["lock_problem"]) == (2, 0, None)


def test_cargo_add_with_an_out_of_date_lock_file_does_not_update_it(tiny: Path) -> None:
    _lock(tiny)
    (tiny / "util" / "src").mkdir(parents=True)
    (tiny / "util" / "Cargo.toml").write_text('[package]\nname = "util"\nversion = "0.1.0"\n')
    (tiny / "util" / "src" / "lib.rs").write_text("")
    (tiny / "Cargo.toml").write_text('[workspace]\nmembers = ["app", "core", "util"]\n'
                                     'resolver = "2"\n')
    files = tree_snapshot(tiny)
    out, err, code = ctx(tiny / ".ctx", "--format", "json", "add", "cargo")
    assert (code, err) == (0, NO_LOCK_NOTE.format("out of date"))
    assert tree_snapshot(tiny) == files
    assert json.loads(out)["packages"] == 3


def test_cargo_add_with_a_relative_manifest_path_of_a_member(tiny: Path) -> None:
    """``--manifest-path app/Cargo.toml`` as the help's example gives it, from the work tree."""
    _lock(tiny)
    files = tree_snapshot(tiny)
    out, err, code = ctx(tiny / ".ctx", "--format", "json", "add", "cargo",
                         "--manifest-path", "app/Cargo.toml")
    assert (code, err) == (0, "")
    assert (json.loads(out)["workspace_root"], json.loads(out)["packages"]) == (".", 2)
    assert tree_snapshot(tiny) == files


def test_cargo_add_on_a_broken_manifest_names_cargo_s_error_line(tiny: Path) -> None:
    (tiny / "Cargo.toml").write_text('[workspace]\nmembers = ["app", "core"]\n[[[\n')
    before = store_digest(tiny / ".ctx")
    out, err, code = ctx(tiny / ".ctx", "add", "cargo", ok=False)
    assert (code, out) == (1, "")
    assert err.startswith("ctx: error[E011]: cargo metadata failed (exit 101): error: "), err
    assert "Cargo.toml:3:" in err and len(err.strip().splitlines()) == 1, err
    assert store_digest(tiny / ".ctx") == before
