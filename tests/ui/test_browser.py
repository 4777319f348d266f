"""``ctx ui`` in a real headless Chromium: each page renders its content, the page's own console
stays free of errors, and the graph's screenshot shows a drawing with its cycle in red.

Slow (a browser starts once per module, about two seconds); run with the whole suite.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxstore.session import Session
from ctxstore.ui.export import export_pages
from ctxstore.ui.server import UiServer
from tests.ui.png import colour_share, ink_share
from tests.ui.project import Project

# Slow; and the first test of a fresh machine may wait for apt-get to install Chromium.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

CYCLE_RED = (207, 34, 46)  # --cycle in style.css, the colour of a cycle's links and rings


def _wait(browser: Any, css: str, timeout: float = 20) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def _console_problems(browser: Any) -> list[dict[str, Any]]:
    """The console entries of the pages loaded since the last call that are errors or CSP refusals."""
    return [entry for entry in browser.get_log("browser")
            if entry["level"] == "SEVERE" or "Content Security Policy" in entry["message"]]


def _fetched(browser: Any) -> list[str]:
    """Every URL the current page loaded (its scripts, styles, data and API answers)."""
    names: list[str] = browser.execute_script(
        "return performance.getEntriesByType('resource').map(function (e) { return e.name; });")
    return names


def _open(browser: Any, url: str, css: str) -> Any:
    browser.get_log("browser")  # forget what earlier pages logged
    browser.get(url)
    return _wait(browser, css)


def test_browser_timeline_lists_decisions_tasks_notes_commits_and_sessions(
        browser: Any, server: UiServer, project: Project) -> None:
    _open(browser, server.url, "#timeline .entry")
    text = browser.find_element("id", "main").text
    for expected in ("Keep the session cache in pkg/a.py behind one function, alpha()",
                     "Fix the retry loop in pkg/c.py", "The retry loop calls alpha three times",
                     "second session: notes", "How should we store the session cache"):
        assert expected in text
    entries = browser.find_elements("css selector", "#timeline .entry")
    assert len(entries) == 8  # 4 nodes, 3 commits, 1 session
    link = browser.find_element("css selector", f'a[href="node.html#{project.decision}"]')
    assert link.text.startswith("Keep the session cache")
    fetched = _fetched(browser)
    assert server.url + "assets/app.js" in fetched
    assert any(url.startswith(server.url + "api/timeline?") for url in fetched)
    assert [url for url in fetched if not url.startswith(server.url)] == []  # nothing else
    assert _console_problems(browser) == []


def test_browser_node_page_shows_history_edges_and_evidence(browser: Any, server: UiServer,
                                                            project: Project) -> None:
    _open(browser, server.url + f"node.html#{project.decision}", "pre.content")
    text = browser.find_element("id", "main").text
    assert "History (2 versions, oldest first)" in text
    assert "Keep the session cache in pkg/a.py behind one function\n" in text + "\n"
    assert "Mentions" in text and "pkg/a.py" in text and "tool: narrative" in text
    assert len(browser.find_elements("css selector", ".version")) == 2
    # the file at the other end of the edge opens its own page
    browser.find_element("css selector", 'a[href="node.html#file%3Apkg%2Fa.py"]').click()
    _wait(browser, "h2")
    assert "Mentioned by (1)" in browser.find_element("id", "main").text
    assert _console_problems(browser) == []


def _graph_shot(browser: Any) -> bytes:
    box = browser.find_element("id", "graph")
    return box.screenshot_as_png


def test_browser_graph_draws_the_import_cycle(browser: Any, server: UiServer, tmp_path: Path) -> None:
    svg = _open(browser, server.url + "graph.html", "#graph svg")
    assert int(svg.get_attribute("data-nodes")) == len(browser.find_elements("css selector", "#graph g.node"))
    assert int(svg.get_attribute("data-nodes")) >= 6
    assert int(svg.get_attribute("data-cycle-links")) == 2
    ring = browser.find_elements("css selector", "#graph g.node.cycle")
    assert sorted(g.get_attribute("data-id") for g in ring) == ["file:pkg/a.py", "file:pkg/b.py"]
    shot = _graph_shot(browser)
    (tmp_path / "graph.png").write_bytes(shot)
    assert ink_share(shot) > 0.01  # a drawing, not an empty box
    assert colour_share(shot, CYCLE_RED) > 0.0003  # the cycle is drawn in red
    assert "Cycles (1)" in browser.find_element("id", "main").text
    assert [url for url in _fetched(browser) if not url.startswith(server.url)] == []
    assert _console_problems(browser) == []


def test_browser_graph_pans_zooms_and_opens_a_node(browser: Any, server: UiServer) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

    _open(browser, server.url + "graph.html", "#graph svg")
    view = browser.find_element("css selector", "#graph g.viewport")
    before = view.get_attribute("transform")
    svg = browser.find_element("css selector", "#graph svg")
    ActionChains(browser).move_to_element_with_offset(svg, 5, 5).click_and_hold() \
        .move_by_offset(60, 40).release().perform()
    panned = view.get_attribute("transform")
    assert panned != before and "scale" in panned
    ActionChains(browser).scroll_from_origin(ScrollOrigin.from_element(svg), 0, -300).perform()
    assert view.get_attribute("transform") != panned
    node = browser.find_element("css selector", '#graph g.node[data-id="file:pkg/c.py"] circle')
    node.click()
    _wait(browser, "h2")
    assert browser.current_url.endswith("node.html#file%3Apkg%2Fc.py")
    assert _console_problems(browser) == []


def test_browser_pack_explorer_shows_items_why_and_budget(browser: Any, server: UiServer) -> None:
    _open(browser, server.url + "pack.html", "#pack-form")
    browser.find_element("id", "task").send_keys("fix the retry loop in retry_loop")
    browser.find_element("id", "budget").send_keys("4000")
    browser.find_element("css selector", "#pack-form button[type=submit]").click()
    _wait(browser, "#pack-items tbody tr")
    rows = browser.find_elements("css selector", "#pack-items tbody tr")
    assert rows
    text = browser.find_element("id", "main").text
    assert "pkg/c.py" in text and "matched terms:" in text
    line = browser.find_element("id", "budget-line").text
    assert line.startswith(f"{len(rows)} items, ") and "of 4,000 tokens used" in line
    assert browser.current_url.endswith("budget=4000&depth=&narrative=1&graph=1")
    assert [url for url in _fetched(browser) if not url.startswith(server.url)] == []
    assert _console_problems(browser) == []


def test_browser_transcripts_topics_and_search(browser: Any, server: UiServer) -> None:
    _open(browser, server.url + "memory.html", "#topics h2")
    assert "How should we store the session cache" in browser.find_element("id", "topics").text
    box = browser.find_element("id", "memory-q")
    box.send_keys("redis session cache")
    browser.find_element("css selector", "#memory-form button").click()
    _wait(browser, "#search-results .hit")
    results = browser.find_element("id", "search-results").text
    assert "earlier (" in results
    assert "from: branch main" in results  # where the result was said (the project has no Git)
    assert _console_problems(browser) == []


@pytest.fixture(scope="module")
def site(project: Project, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("export") / "site"
    session = Session.open(project.ctx)
    try:
        export_pages(session, folder, packs=["fix the retry loop"])
    finally:
        session.close()
    yield folder


def test_browser_export_opens_from_disk(browser: Any, site: Path, project: Project) -> None:
    base = site.as_uri() + "/"
    _open(browser, base + "index.html", "#timeline .entry")
    assert "static export" in browser.find_element("id", "mode").text
    assert "Fix the retry loop in pkg/c.py" in browser.find_element("id", "main").text
    _open(browser, base + f"node.html#{project.decision}", "pre.content")
    assert "History (2 versions" in browser.find_element("id", "main").text
    svg = _open(browser, base + "graph.html", "#graph svg")
    assert int(svg.get_attribute("data-cycle-links")) == 2
    assert ink_share(_graph_shot(browser)) > 0.01
    _open(browser, base + "pack.html#task=fix+the+retry+loop", "#pack-items tbody tr")
    _open(browser, base + "memory.html", "#topics h2")
    # (the browser times no file:// loads: any entry would be a fetch from elsewhere)
    assert [url for url in _fetched(browser) if not url.startswith(base)] == []
    assert _console_problems(browser) == []


def test_browser_a_page_of_another_server_cannot_read_the_api(browser: Any, server: UiServer) -> None:
    # A second server stands for a page of another origin: its script may not read ours.
    other = UiServer.start(Path(server._ctx_dir))  # noqa: SLF001 (the same store, another port)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        _open(browser, other.url, "#timeline .entry")
        result = browser.execute_async_script(
            "var done = arguments[0];"
            f"fetch({server.url + 'api/timeline'!r}).then(function (r) {{ return r.text(); }})"
            ".then(function () { done('read'); }, function (e) { done('refused: ' + e.name); });")
        assert result.startswith("refused")
    finally:
        other.shutdown()
        thread.join(10)
        other.close()


HOSTILE = ('<script>window.PWNED = 1</script><img src=x onerror="window.PWNED = 2">'
           '<a href="javascript:window.PWNED = 3">click</a> </pre><b>bold?</b>')


def test_browser_stored_text_is_shown_as_text_never_run(browser: Any, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ctxstore.cli import cli
    from ctxstore.init import init_store

    ctx = tmp_path / "work" / ".ctx"
    init_store(ctx, git=False)
    added = CliRunner().invoke(cli, ["--ctx-dir", str(ctx), "add", "--type", "fact", HOSTILE])
    assert added.exit_code == 0, added.output
    node = added.stdout.split()[0]
    ui = UiServer.start(ctx)
    thread = threading.Thread(target=ui.serve_forever, daemon=True)
    thread.start()
    try:
        _open(browser, ui.url, "#timeline .entry")
        assert HOSTILE.split("<a ")[0] in browser.find_element("id", "timeline").text
        _open(browser, ui.url + f"node.html#{node}", "pre.content")
        assert browser.find_element("css selector", "pre.content").text == HOSTILE
        assert browser.find_elements("css selector", "#main img, #main script, #main b") == []
        assert browser.execute_script("return window.PWNED === undefined")
        assert _console_problems(browser) == []
    finally:
        ui.shutdown()
        thread.join(10)
        ui.close()
