#!/usr/bin/python3
"""The scheduler's dashboard in headless Chromium (Debian's `chromium`,
driven over the DevTools protocol by cdp.py): one page, opened before a
job exists and never reloaded, shows the job appear, run (its worker busy)
and finish, then a cached resubmission move the cache hit rate to 50%.
The page fetches nothing but its own origin. A screenshot is saved and
checked: a real image, not blank, and the DOM it shows holds the job ids.

The farm is on loopback with farm_test_compiler (its model text makes it
sleep, so the running state lasts long enough to be seen).

    test_dashboard.py BUILD_DIR SCREENSHOT.png
"""

import base64
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, png_pixels  # noqa: E402
from farm import Farm, http_get, wait_for  # noqa: E402

FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILED.append(what)


def main():
    build, shot = sys.argv[1], sys.argv[2]
    farm = Farm(build, name="dashboard").start()
    browser = None
    try:
        farm.start_worker("w-x86", "x86")
        url = farm.scheduler_http + "/"
        code, ctype, html = http_get(url)
        check(code == 200 and ctype.startswith("text/html"), f"GET / is the page ({code} {ctype})")
        check("http://" not in html and "https://" not in html and "src=" not in html,
              "the page names no outside asset")

        browser = Browser()
        browser.page("Network.enable")
        browser.page("Page.enable")
        browser.page("Page.navigate", url=url)
        js_state = lambda sel: f"(() => {{ const r = document.querySelector('{sel}'); return r ? r.dataset.state : null }})()"
        wait_for("the worker on the page", lambda: browser.evaluate(js_state('tr[data-worker="w-x86"]')) == "idle")
        check(browser.evaluate("document.querySelector('#jobs td.empty')?.textContent") == "no job yet",
              "before any job the page says 'no job yet'")
        browser.evaluate("window.__loadedOnce = 42")

        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, "slow.onnx")
            with open(model, "w") as f:
                f.write("model: seen on the dashboard\nsleep 2500\n")
            env = dict(os.environ, NIMBLE_EVENTS=farm.events, NIMBLE_CONFIG="/dev/null")
            submit = subprocess.Popen([f"{build}/client/nimble", "--scheduler", farm.clients, "--store", farm.store,
                                       "--token", farm.token, "submit", model, "--targets=x86", "--name",
                                       "team/dash", "--timeout", "60"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            seen, worker_seen, pct_seen = [], set(), set()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                st = browser.evaluate(js_state('tr[data-job="j-1"]'))
                if st and (not seen or seen[-1] != st):
                    seen.append(st)
                worker_seen.add(browser.evaluate(js_state('tr[data-worker="w-x86"]')))
                pct = browser.evaluate("document.querySelector('tr[data-job=\"j-1\"] .bar')?.title")
                if pct:
                    pct_seen.add(pct)
                if st == "done":
                    break
                time.sleep(0.1)
            out, err = submit.communicate(timeout=60)
            check(submit.returncode == 0, f"nimble submit succeeded ({submit.returncode}) {err.strip()[:200]}")
            check("running" in seen and seen[-1] == "done" and seen.index("running") < len(seen) - 1,
                  f"the job appeared, ran and finished on the page: {seen}")
            check("busy" in worker_seen, f"its worker showed busy meanwhile: {sorted(x or '-' for x in worker_seen)}")
            check(len(pct_seen) >= 1, f"a progress bar showed the compiler's progress: {sorted(pct_seen)}")
            wait_for("the worker idle again", lambda: browser.evaluate(js_state('tr[data-worker="w-x86"]')) == "idle")
            farm.nimble("submit", model, "--targets=x86", "--name", "team/dash", "--timeout", "60")
            rate = wait_for("the hit rate after a cached resubmit",
                            lambda: browser.evaluate("document.getElementById('hit-rate').textContent") == "50%"
                            and browser.evaluate(js_state('tr[data-job="j-2"]')) == "done", timeout=10)
            check(rate, "a cached resubmission shows as job j-2, done, and a 50% hit rate (1 of 2)")

        check(browser.evaluate("window.__loadedOnce") == 42, "the page updated live: it was never reloaded")
        text = browser.evaluate("document.body.innerText")
        check("j-1" in text and "j-2" in text and "team/dash" in text and "w-x86" in text,
              "the DOM shows both job ids, the name and the worker")
        chip = browser.evaluate("document.querySelector('tr[data-job=\"j-2\"] .task')?.innerText")
        check(chip and "x86" in chip and "done" in chip and "cached" in chip, f"j-2's x86 target: {chip!r}")

        shot_png = base64.b64decode(browser.page("Page.captureScreenshot", format="png")["data"])
        os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
        with open(shot, "wb") as f:
            f.write(shot_png)
        w, h, ch, rows = png_pixels(shot_png)
        colors = Counter()
        for row in rows[::4]:
            for x in range(0, w * ch, ch * 4):
                colors[bytes(row[x:x + 3])] += 1
        top = colors.most_common(1)[0][1] / sum(colors.values())
        check(w >= 800 and h >= 600, f"screenshot {shot}: {w}x{h}")
        check(len(colors) >= 20 and top < 0.95,
              f"the screenshot is not blank: {len(colors)} colours sampled, the commonest covers {top:.0%}")

        urls = [e["params"]["request"]["url"] for e in browser.events
                if e.get("method") == "Network.requestWillBeSent"]
        outside = [u for u in urls if not u.startswith(farm.scheduler_http)]
        check(urls and not outside, f"{len(urls)} requests, all to the scheduler's port: {outside[:3]}")
        check(any(u.endswith("/api/state") for u in urls), "the page polled /api/state")
    except BaseException:
        if browser:
            browser.close()
        farm.kill()
        raise
    browser.close()
    farm.stop()
    if FAILED:
        print(f"{len(FAILED)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
