"""``ctx llm --timeout S`` is one wall-clock deadline over the whole exchange (issue 34 item 9).

A real server on 127.0.0.1 answers slowly, one byte every quarter second: in the status
line, in the headers, or in the body. A socket timeout bounds each read alone, so before
this fix a server trickling its headers kept ``ctx llm --timeout 3`` waiting past 40 s.
Each case must end with E022 well within the deadline plus a Python start-up (the
subprocess timeout is the assertion).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.init import init_store

DRIP_SECONDS = 0.25
TIMEOUT = 2.0


def _drip(conn: socket.socket, head: bytes, drip: bytes, stop: threading.Event) -> None:
    try:
        conn.settimeout(5)
        conn.recv(65536)  # the request (enough of it)
        conn.sendall(head)
        for byte in (drip[i:i + 1] for i in range(len(drip))):
            if stop.wait(DRIP_SECONDS):
                return
            conn.sendall(byte)
        stop.wait(60)
    except OSError:
        pass  # the client gave up: what is being tested
    finally:
        conn.close()


@contextmanager
def slow_server(head: bytes, drip: bytes) -> Iterator[str]:
    """A server that sends ``head`` at once, then ``drip`` one byte every DRIP_SECONDS."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=_drip, args=(conn, head, drip, stop), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


CASES = {
    # Every byte of the status line trickles.
    "status line": (b"", b"HTTP/1.1 200 OK\r\n" + b"X" * 400),
    # The status line at once, then one header byte at a time (the reported case).
    "headers": (b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"a" * 400 + b"\r\n\r\n"),
    # Headers at once, the body one byte at a time.
    "body": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n",
             b'{"content": "' + b"a" * 380 + b'"}'),
}


@pytest.mark.parametrize("protocol", ["auto", "llama"])
@pytest.mark.parametrize("case", list(CASES))
def test_llm_timeout_holds_while_a_server_trickles(tmp_path: Path, case: str, protocol: str) -> None:
    work = tmp_path / "w"
    work.mkdir()
    init_store(work / ".ctx", git=False)
    config = work / ".ctx" / "config.toml"
    config.write_text(config.read_text().replace('protocol = "auto"', f'protocol = "{protocol}"'))
    pack = tmp_path / "pack.json"
    pack.write_text(json.dumps({"task": "why does it hang"}))
    head, drip = CASES[case]
    with slow_server(head, drip) as url:
        started = time.monotonic()
        res = run_ctx(["--ctx-dir", str(work / ".ctx"), "llm", "--server", url, "--pack", str(pack),
                       "--timeout", str(TIMEOUT)], timeout=TIMEOUT + 12)
        took = time.monotonic() - started
    assert res.returncode == 1 and res.stdout == "", res.stderr
    assert res.stderr.startswith("ctx: error[E022]:"), res.stderr
    assert f"no reply within {TIMEOUT:g} s" in res.stderr, res.stderr
    assert took < TIMEOUT + 10, took
