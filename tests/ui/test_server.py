"""The ``ctx ui`` server over real HTTP on 127.0.0.1: the token, GET only, the address, read-only."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from ctxstore.ui.server import CONTENT_SECURITY_POLICY, UiServer
from tests.ui.project import Project, tree_digest


def _request(server: UiServer, method: str, path: str, host: str | None = None
             ) -> tuple[int, dict[str, str], bytes]:
    address, port = server.address
    conn = http.client.HTTPConnection(address, port, timeout=30)
    try:
        headers = {"Host": host} if host is not None else {}
        conn.request(method, path, headers=headers)
        res = conn.getresponse()
        return res.status, {k.lower(): v for k, v in res.getheaders()}, res.read()
    finally:
        conn.close()


def _api(server: UiServer, name: str, **params: str) -> tuple[int, Any]:
    status, _, body = _request(server, "GET", f"/{server.token}/api/{name}?{urlencode(params)}")
    return status, json.loads(body)


def test_server_serves_pages_assets_and_data_with_the_token(server: UiServer) -> None:
    assert server.url == f"http://127.0.0.1:{server.address[1]}/{server.token}/"
    status, headers, body = _request(server, "GET", f"/{server.token}/")
    assert status == 200 and b'data-page="timeline"' in body
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert headers["cache-control"] == "no-store" and headers["x-frame-options"] == "DENY"
    # Each page: the one template filled with its view (app.js renders it) and its title.
    for name, view, title in [("index.html", "timeline", "Timeline"), ("node.html", "node", "Node"),
                              ("graph.html", "graph", "Graph"), ("pack.html", "pack", "Pack explorer"),
                              ("memory.html", "memory", "Transcripts")]:
        status, headers, body = _request(server, "GET", f"/{server.token}/{name}")
        assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
        page = body.decode()
        assert f'<body data-page="{view}">' in page and f"<title>ctx · {title}</title>" in page
        assert "$" not in page and page.count('data-nav="') == 4
    status, headers, body = _request(server, "GET", f"/{server.token}/assets/graph.js")
    assert status == 200 and headers["content-type"].startswith("text/javascript")
    assert b"CtxGraph" in body
    assert _request(server, "GET", f"/{server.token}/data.js")[2] == b"window.CTX_STATIC = false;\n"
    status, headers, _ = _request(server, "GET", f"/{server.token}")
    assert status == 301 and headers["location"] == f"/{server.token}/"


@pytest.mark.parametrize("path", ["/", "/index.html", "/api/timeline", "/assets/app.js",
                                  "/WRONGTOKEN/", "/WRONGTOKEN/api/timeline", "/favicon.ico"])
def test_server_refuses_a_request_without_the_token(server: UiServer, path: str) -> None:
    status, _, body = _request(server, "GET", path)
    assert (status, body) == (403, b"forbidden\n")


def test_server_refuses_a_token_with_one_character_changed(server: UiServer) -> None:
    wrong = server.token[:-1] + ("A" if server.token[-1] != "A" else "B")
    assert _request(server, "GET", f"/{wrong}/")[0] == 403
    assert _request(server, "GET", f"/{server.token}x/")[0] == 403


def test_server_refuses_a_foreign_host_header(server: UiServer) -> None:
    port = server.address[1]
    assert _request(server, "GET", f"/{server.token}/", host=f"evil.example:{port}")[0] == 403
    assert _request(server, "GET", f"/{server.token}/", host=f"localhost:{port}")[0] == 200


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
def test_server_answers_only_get(server: UiServer, method: str) -> None:
    status, headers, body = _request(server, method, f"/{server.token}/api/timeline")
    assert (status, headers["allow"], body) == (405, "GET", b"")


def test_server_unknown_paths_are_404(server: UiServer) -> None:
    for rest in ("nowhere.html", "assets/../pages.py", "assets/nothing.js", "data/0.js"):
        assert _request(server, "GET", f"/{server.token}/{rest}")[0] == 404


def _listeners(port: int) -> list[tuple[str, str]]:
    """(file, local address hex) of every listening socket on ``port`` (Linux /proc)."""
    found = []
    for name in ("tcp", "tcp6"):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            address, port_hex = fields[1].rsplit(":", 1)
            if int(port_hex, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append((name, address))
    return found


def test_server_listens_only_on_127_0_0_1(server: UiServer) -> None:
    assert server.address[0] == "127.0.0.1"
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp to list the listening sockets")
    assert _listeners(server.address[1]) == [("tcp", "0100007F")]  # 127.0.0.1, and no IPv6


def test_server_binds_without_a_name_lookup(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def lookup(*args: object) -> str:
        raise AssertionError("a name lookup may reach a DNS server")

    monkeypatch.setattr(socket, "getfqdn", lookup)
    ui = UiServer(project.ctx)
    try:
        assert ui.address[0] == "127.0.0.1"
    finally:
        ui.close()


def test_server_api_answers_and_errors(server: UiServer, project: Project) -> None:
    status, timeline = _api(server, "timeline")
    assert status == 200 and timeline["store"] == str(project.ctx.resolve())
    assert {e["id"] for e in timeline["entries"]} >= {project.decision, project.task}
    status, node = _api(server, "node", ref=project.decision)
    assert status == 200 and node["page"] == "node" and len(node["versions"]) == 2
    status, file_page = _api(server, "node", ref="file:pkg/a.py")
    assert status == 200 and file_page["page"] == "endpoint"
    status, graph = _api(server, "graph")
    assert status == 200 and graph["cycles"] == [["file:pkg/a.py", "file:pkg/b.py"]]
    status, missing = _api(server, "node", ref="01ZZZZZZZZZZZZZZZZZZZZZZZZ")
    assert status == 404 and missing["error"]["code"] == "E019"
    status, bad = _api(server, "graph", level="planets")
    assert status == 400 and bad["error"]["code"] == "E011"
    status, bad = _api(server, "pack", task="retry", budget="lots")
    assert (status, bad["error"]["message"]) == (400, "budget must be a whole number, not 'lots'")
    status, unknown = _api(server, "nothing")
    assert status == 400 and unknown["error"]["message"] == "no page 'nothing'"


def test_server_pages_write_nothing_to_the_store(server: UiServer, project: Project) -> None:
    before = tree_digest(project.ctx)
    calls = [("timeline", {}), ("node", {"ref": project.decision}), ("node", {"ref": "file:pkg/a.py"}),
             ("graph", {}), ("graph", {"level": "all"}), ("graph", {"focus": "file:pkg/c.py"}),
             ("pack", {"task": "fix the retry loop", "budget": "3000"}),
             ("pack", {"task": "session cache", "narrative": "0", "graph": "0"}),
             ("transcripts", {}), ("search", {"q": "redis session cache"}),
             ("search", {"q": "cache", "since": "2026-01-01", "intent": "decision"})]
    for name, params in calls:
        status, body = _api(server, name, **params)
        assert status == 200, (name, body)
    pack = _api(server, "pack", task="fix the retry loop")[1]
    assert pack["pack"]["retrieved"] and len(pack["costs"]) == len(pack["pack"]["retrieved"])
    search = _api(server, "search", q="redis session cache")[1]
    assert search["results"][0]["topic"].startswith("How should we store the session cache")
    assert tree_digest(project.ctx) == before


def test_server_api_takes_text_with_any_characters(server: UiServer) -> None:
    task = "fix <ctx:remember>the & retry</ctx:remember> loop ü ' \" %"
    status, _, body = _request(server, "GET", f"/{server.token}/api/pack?task={quote(task)}")
    pack = json.loads(body)["pack"]
    assert status == 200 and pack["task"].startswith("fix &lt;ctx:remember>")
