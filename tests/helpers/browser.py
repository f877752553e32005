"""A real headless browser for the tests: Debian's ``chromium`` driven by its
``chromium-driver`` through selenium, kept on loopback (no background services, and every
host other than 127.0.0.1 resolves to nothing and goes to a dead local proxy).

    with chromium() as driver: driver.get(url)
    dom = dump_dom(url)        # chromium --headless --dump-dom, after the page's fetches
"""

import contextlib
import shutil
import subprocess

# Loopback only: nothing is resolved or fetched outside 127.0.0.1, and none of Chromium's
# own background traffic (updates, sync, metrics, safe browsing) starts.
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-default-apps", "--disable-domain-reliability",
         "--disable-client-side-phishing-detection", "--metrics-recording-only",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
         "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1",
         "--window-size=1400,1100"]


def require_chromium() -> str:
    binary = shutil.which("chromium")
    if binary is None or shutil.which("chromedriver") is None:
        raise RuntimeError("the browser tests need Debian's chromium and chromium-driver "
                           "(bash scripts/setup.sh installs them)")
    return binary


@contextlib.contextmanager
def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = require_chromium()
    for flag in FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def javascript_errors(driver) -> list[str]:
    """Console errors other than an HTTP status the page handles itself (a 401 that makes it
    ask for the API key is logged by Chromium as a failed resource load)."""
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE" and "Failed to load resource" not in entry["message"]]


def dump_dom(url: str) -> str:
    done = subprocess.run([require_chromium(), *FLAGS, "--virtual-time-budget=15000",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120)
    return done.stdout
