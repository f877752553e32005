"""The session inspector (``--arc-ui`` -> ``/v1/arc/ui``) and the replay report, in a real
headless browser (Debian's chromium through selenium, kept on loopback: ``tests/browser.py``).

    pytest tests/test_inspector.py
"""

import json
import subprocess
import sys
import urllib.request

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.helpers.browser import chromium, dump_dom, javascript_errors
from tests.helpers.conversations import TOOLS, tool_turn
from tests.helpers.http_calls import call

pytestmark = pytest.mark.slow
KEY = "key-a"  # one of the shared keyed server's keys
HUMAN = "Never touch config/prod.yaml; the retry budget is 7."


def drive(base: str, headers: dict | None = None, turns: int = 10, compactions_at_least: int = 2) -> str:
    """A function-calling session past a few compactions; returns its id."""
    _, session = call(base, "POST", "/v1/arc/sessions", headers=headers)
    model = call(base, "GET", "/v1/models", headers=headers)[1]["data"][0]["id"]
    messages, compactions = [{"role": "user", "content": "Read every log."}], 0
    for index in range(turns):
        # Logs that fit H (about 900 tokens): compactions move turns out of H, into the catalog
        # (a log over H's cap would be cited where it is, and the catalog stay empty).
        body = "".join(f"log {index} line {n}: ok\n" for n in range(100))
        turn, _ = tool_turn(index, body)
        messages += turn
        status, answer = call(base, "POST", "/v1/chat/completions", {
            "model": model, "messages": messages, "max_tokens": 4, "tools": TOOLS,
            "vllm_xargs": {"arc_session": session["id"]}}, headers=headers)
        assert status == 200, answer
        compactions += answer["arc"]["compactions"]
        messages.append({"role": "assistant", "content": "ok"})
        if index == 1:  # the user speaks: a human turn, marked on the page
            messages.append({"role": "user", "content": HUMAN})
    assert compactions >= compactions_at_least
    return session["id"]


@pytest.fixture(scope="module")
def inspector(arc_server):
    """The shared ARC server (``--arc-ui``), and a session driven past compactions on it."""
    return arc_server, drive(arc_server.base)


def test_the_session_page_shows_the_timeline_the_view_and_stubs_verbatim(inspector, tmp_path):
    server, sid = inspector
    records = call(server.base, "GET", f"/v1/arc/sessions/{sid}/requests")[1]
    with chromium() as driver:
        driver.get(f"{server.base}/v1/arc/ui?session={sid}")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#view .stub"))
        # One point per request on the timeline, compactions marked.
        assert len(driver.find_elements(By.CSS_SELECTOR, "#timeline svg circle.point")) == len(records)
        assert driver.find_elements(By.CSS_SELECTOR, "#timeline svg path.compaction")
        # A stub in the view opens the stored observation, exactly.
        stub = driver.find_elements(By.CSS_SELECTOR, "#view .stub")[0]
        oid = stub.get_attribute("data-id")
        stub.click()
        wait.until(lambda d: d.find_element(By.ID, "observation-id").text.startswith("§" + oid))
        shown = driver.execute_script("return document.getElementById('observation').textContent")
        status, stored = call(server.base, "GET", f"/v1/arc/sessions/{sid}/observations/{oid}")
        assert status == 200 and shown == stored.decode("utf-8")
        # The catalog page and a search both list stubs that open the same way.
        assert driver.find_elements(By.CSS_SELECTOR, "#catalog .stub")
        driver.find_element(By.ID, "search").send_keys("log 3 line 7:")
        driver.find_element(By.CSS_SELECTOR, "#search-form button").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results .stub"))
        [found] = driver.find_elements(By.CSS_SELECTOR, "#search-results .stub")
        found.click()
        wait.until(lambda d: d.find_element(By.ID, "observation-id").text.startswith(
            "§" + found.get_attribute("data-id")))
        assert "log 3 line 7: ok" in driver.execute_script(
            "return document.getElementById('observation').textContent")
        # The user's own words are marked as theirs, whole, after compaction.
        humans = driver.find_elements(By.CSS_SELECTOR, "#view li.human")
        assert humans and any(HUMAN in item.text for item in humans)
        assert all("the user's words" in item.find_element(By.CSS_SELECTOR, ".role").text for item in humans)
        view = call(server.base, "GET", f"/v1/arc/sessions/{sid}/view")[1]
        assert len(humans) == len(view["human_messages"]) and view["human_turns"]["verbatim"] == 1
        assert "1 whole" in driver.find_element(By.ID, "view-tokens").text
        assert javascript_errors(driver) == []
        driver.save_screenshot(str(tmp_path / "inspector.png"))
    assert (tmp_path / "inspector.png").stat().st_size > 10_000


def test_chromium_dump_dom_shows_the_stub_ids_and_the_timeline(inspector):
    server, sid = inspector
    dom = dump_dom(f"{server.base}/v1/arc/ui?session={sid}")
    view = call(server.base, "GET", f"/v1/arc/sessions/{sid}/view")[1]
    assert view["compacted"] and view["tokens"] <= view["budget_tokens"]
    ids = view["stubs"]  # the stubs the view shows that name stored observations
    assert ids and all(f"§{oid}" in json.dumps(view["messages"], ensure_ascii=False) for oid in ids)
    assert all(f'data-id="{oid}"' in dom for oid in ids)
    assert 'data-id="1f3a9c0d"' not in dom  # the example id in ARC's note stays text
    assert '<svg' in dom and 'class="point"' in dom
    # The session list links the session, with the APIs its requests came through and the
    # client's own id for it: an Anthropic client's session too.
    model = call(server.base, "GET", "/v1/models")[1]["data"][0]["id"]
    status, _ = call(server.base, "POST", "/v1/messages", {"model": model, "max_tokens": 2, "messages": [
        {"role": "user", "content": "hi"}]}, headers={"X-Claude-Code-Session-Id": "cc-listed"})
    listing = dump_dom(f"{server.base}/v1/arc/ui")
    assert status == 200 and f"?session={sid}" in listing
    assert "<td>messages</td><td>cc-listed</td>" in listing and "<td>chat</td><td></td>" in listing


def test_read_only_routes_answer_bad_input_with_a_clear_4xx(inspector):
    server, sid = inspector
    status, error = call(server.base, "GET", f"/v1/arc/sessions/{sid}/search")
    assert status == 400 and "q:" in error["error"]["message"]
    status, error = call(server.base, "GET", f"/v1/arc/sessions/{sid}/search?q=x&limit=0")
    assert status == 400 and "limit" in error["error"]["message"]
    for route in ("view", "timeline", "search?q=x"):
        status, error = call(server.base, "GET", f"/v1/arc/sessions/sess_unknown/{route}")
        assert status == 404
    status, found = call(server.base, "GET", f"/v1/arc/sessions/{sid}/search?q=LOG%200%20LINE%2012:")
    assert status == 200 and len(found["results"]) == 1
    assert "log 0 line 12: ok" in found["results"][0]["snippet"]


def test_under_an_api_key_the_page_asks_for_it_and_the_shell_carries_no_data(keyed_server):
    server = keyed_server  # --api-key key-a key-b ops, --arc-ui
    auth = {"Authorization": f"Bearer {KEY}"}
    sid = drive(server.base, auth, turns=4, compactions_at_least=1)
    shell = urllib.request.urlopen(server.base + "/v1/arc/ui").read().decode()
    assert "ARC inspector" in shell and sid not in shell
    assert call(server.base, "GET", "/v1/arc/sessions")[0] == 401
    with chromium() as driver:
        driver.get(server.base + "/v1/arc/ui")
        wait = WebDriverWait(driver, 30)
        wait.until(lambda d: d.find_element(By.ID, "key-form").is_displayed())
        driver.find_element(By.ID, "key").send_keys(KEY)
        driver.find_element(By.CSS_SELECTOR, "#key-form button").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#session-rows a"))
        driver.find_element(By.LINK_TEXT, sid).click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline svg circle.point"))
        assert len(driver.find_elements(By.CSS_SELECTOR, "#timeline svg circle.point")) == 4
        assert javascript_errors(driver) == []


def test_the_replay_report_opens_offline_with_a_timeline_per_trajectory(tmp_path):
    from pathlib import Path

    logs = Path(__file__).parent / "fixtures" / "agent_logs"
    done = subprocess.run([sys.executable, "-m", "arc_vllm.cli", "replay", str(logs), "--methods",
                           "arc,sliding_window", "--context-window", "4096", "--max-tokens", "512",
                           "--html", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = tmp_path / "report.html"
    html = report.read_text()
    # Self-contained: no script, nothing fetched (the SVG namespace is a name, not a fetch).
    assert "<script" not in html and "src=" not in html and "href=" not in html
    timelines = sorted((tmp_path / "arc-timelines" / "trajectories").glob("*.json"))
    calls = {data["id"]: len(data["calls"]) for data in map(json.loads, map(Path.read_text, timelines))}
    with chromium() as driver:
        driver.get(report.as_uri())
        svgs = driver.find_elements(By.CSS_SELECTOR, "svg.arc-timeline")
        assert len(svgs) == len(calls) == 9
        for svg in svgs:
            trajectory = svg.find_element(By.XPATH, "..").get_attribute("id")
            assert len(svg.find_elements(By.CSS_SELECTOR, "circle.point")) == calls[trajectory]
        rows = driver.find_elements(By.CSS_SELECTOR, "table tbody tr")
        assert [row.find_element(By.TAG_NAME, "td").text for row in rows] == ["arc", "sliding_window"]
        assert len(driver.find_elements(By.CSS_SELECTOR, "svg.arc-methods polyline.method")) == 2 * 9
        assert javascript_errors(driver) == []
        driver.save_screenshot(str(tmp_path / "report.png"))
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_the_inspector_page_is_off_unless_asked_for(gateway_server):
    """Without --arc-ui (the shared ``gateway`` server has none) there is no page; the read-only
    JSON routes are part of the API."""
    caller = {"Authorization": "Bearer gw", "X-Caller": "team-ui"}
    status, _ = call(gateway_server.base, "GET", "/v1/arc/ui", headers=caller)
    assert status == 404
    _, session = call(gateway_server.base, "POST", "/v1/arc/sessions", headers=caller)
    status, view = call(gateway_server.base, "GET", f"/v1/arc/sessions/{session['id']}/view", headers=caller)
    assert status == 200 and view["messages"] == [] and view["budget_tokens"] == 3584
