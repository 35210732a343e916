#!/usr/bin/python3
"""The attention explorer (examples/train/explore.h), in a real browser.

    explore_browser.py program SOURCE_ROOT BUILD_DIR
    explore_browser.py browser SOURCE_ROOT BUILD_DIR [--checkpoint FILE] [--screenshots DIR]

`program` runs the explore program as a user would (no browser needed):
its errors (a missing checkpoint, a character the vocabulary lacks, a
prompt longer than the block, an empty prompt, a model without attention)
and the page's size for the lecture-size model with a 64-character prompt.

`browser` trains two short runs (the fast model and gpt.py's classes),
writes their pages with train_gpt and explore, opens each in headless
Chromium and checks what a learner would see:
  * the page loads with no console error and makes no network request
    (every request is intercepted through the DevTools protocol's Fetch
    domain and counted; a page that asks for an image proves the count works);
  * the head view draws one line per (head, query, key) whose weight is
    above 0.02, and clicking a token (a real mouse click), or Enter on it,
    draws only that token's lines;
  * the model view has layers x heads matrices, and clicking one opens it
    with its T(T+1)/2 cells and their weights;
  * the query view's weights equal the ones explore --weights-out wrote
    (printed by the C++ program, not read from the page) within 1e-6 and sum
    to 1; "next" changes the query and the weights follow;
  * after the temperature slider is moved with the keyboard to 0.5, the
    probabilities shown are softmax(logits / 0.5) computed here from the
    page's logits;
  * train_gpt's page shows the loss curve's evaluations and the run's sample.
With --checkpoint it uses that checkpoint instead of the short runs (to
photograph a trained model); with --screenshots it saves a PNG of each view.

The client: the Chrome DevTools Protocol over --remote-debugging-pipe (file
descriptors 3 and 4, one JSON message per NUL byte), spoken by this file
with the Python standard library alone. No npm package (puppeteer-core
must match Chromium's protocol version, and npm is one more thing to
install) and no websocket module (python3-websocket): Debian's chromium
package is the only thing the test needs. Without it the test exits with
77, Meson's code for a skipped test, saying why. As root, Chromium needs
--no-sandbox.
"""
import base64
import fcntl
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

THRESHOLD = 0.02  # the head view's documented threshold (docs/explorer.md)
SKIP = 77
failures = []


def check(condition, what):
    print(("ok     " if condition else "FAILED ") + what)
    if not condition:
        failures.append(what)
    return condition


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", **kw)


def page_data(path):
    """The JSON the page embeds (read by Python, for the expected values)."""
    with open(path, encoding="utf-8") as f:
        html = f.read()
    m = re.search(r'<script type="application/json" id="ember-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def as_float32(values):
    """The float32 each number reads as (the page and --weights-out print them differently)."""
    return list(struct.unpack(f"{len(values)}f", struct.pack(f"{len(values)}f", *values)))


def read_weights(path):
    """explore --weights-out: {(layer, head, query): [w_0 .. w_query]}."""
    weights = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            weights[tuple(int(x) for x in fields[:3])] = [float(x) for x in fields[3:]]
    return weights


def train(build, folder, *flags):
    """A short train_gpt run into `folder`; returns its checkpoint."""
    cmd = [os.path.join(build, "examples", "train_gpt"), "--max-iters", "60", "--eval-interval", "20",
           "--eval-iters", "2", "--sample-tokens", "120", "--out", folder, *flags]
    result = run(cmd)
    if result.returncode != 0:
        sys.exit(f"train_gpt failed ({' '.join(cmd)}):\n{result.stdout}\n{result.stderr}")
    return os.path.join(folder, "train_gpt.safetensors")


# ---- the program, without a browser ----------------------------------------------------------

def program_checks(root, build, tmp):
    explore = os.path.join(build, "examples", "explore")
    ckpt = train(build, os.path.join(tmp, "fast"))

    def fails(args, *expected):
        result = run([explore, *args, "--out", os.path.join(tmp, "x.html")])
        ok = result.returncode == 2 and all(e in result.stderr for e in expected) and "Traceback" not in result.stderr
        check(ok, f"explore {' '.join(args)!r} exits 2 saying {expected}"
              + ("" if ok else f" (status {result.returncode}, stderr {result.stderr.strip()!r})"))

    fails(["--checkpoint", os.path.join(tmp, "missing.safetensors"), "--prompt", "ab"],
          "explore: --checkpoint:", "missing.safetensors")
    fails(["--checkpoint", ckpt, "--prompt", "caf\u00e9 \u2603"],
          "explore: --prompt: character 195 ('\u00e9', the first of its 2 bytes) is not in the vocabulary")
    fails(["--checkpoint", ckpt, "--prompt", "a" * 65], "explore: --prompt has 65 characters", "block_size = 64")
    fails(["--checkpoint", ckpt, "--prompt", ""], "explore: --prompt TEXT is required")
    fails(["--checkpoint", ckpt], "explore: --prompt TEXT is required")
    fails(["--prompt", "ab"], "explore: --checkpoint FILE is required")
    fails(["--checkpoint", ckpt, "--prompt", "ab", "--layer", "9"], "explore: --layer 9", "3 layers")
    bigram = train(build, os.path.join(tmp, "bigram"), "--preset", "bigram")
    fails(["--checkpoint", bigram, "--prompt", "ab"], "bigram model, which has no attention")

    # Every model train_gpt trains that attends gets a page, saying which form it shows.
    forms = [(["--model", "nanogpt"], "nanoGPT's model.py in the fast model", "ANTONIO:"),
             (["--preset", "head"], "the lecture's \"head\" stage", "the king"),
             (["--preset", "multihead"], "the lecture's \"multihead\" stage", "the king"),
             (["--preset", "layernorm"], "the lecture's \"layernorm\" stage", "the king")]
    for flags, form, prompt in forms:
        ckpt = train(build, os.path.join(tmp, flags[1]), *flags, "--max-iters", "20", "--eval-interval", "10")
        page, weights = os.path.join(tmp, flags[1] + ".html"), os.path.join(tmp, flags[1] + ".txt")
        result = run([explore, "--checkpoint", ckpt, "--prompt", prompt, "--out", page, "--weights-out", weights])
        if not check(result.returncode == 0, f"explore {' '.join(flags)}: {result.stdout.strip()}{result.stderr}"):
            continue
        d, w = page_data(page), read_weights(weights)
        T = len(d["tokens"])
        rows = d["n_layer"] * d["n_head"] * T
        check(d["form"].startswith(form) and len(w) == rows and all(abs(sum(r) - 1) <= 1e-5 for r in w.values())
              and all(as_float32(w[(l, h, t)]) == as_float32(d["weights"][l][h][t]) for (l, h, t) in w),
              f"explore {' '.join(flags)}: {d['n_layer']} x {d['n_head']} heads over {T} positions, "
              f"the same weights in the page and in --weights-out; the page says: {form}")

    # The page's size for the lecture's model (6 layers x 6 heads, n_embd 384,
    # block 256, vocabulary 65) and a 64-character prompt: one training step.
    lecture = train(build, os.path.join(tmp, "lecture"), "--preset", "lecture", "--data",
                    os.path.join(root, "data", "tinyshakespeare.txt"), "--max-iters", "1", "--eval-interval", "1",
                    "--eval-iters", "1", "--batch-size", "1", "--sample-tokens", "20")
    page = os.path.join(tmp, "lecture.html")
    prompt = "First Citizen:\nBefore we proceed any further, hear me speak.\nAll"
    prompt = (prompt * 2)[:64]
    result = run([explore, "--checkpoint", lecture, "--prompt", prompt, "--out", page])
    check(result.returncode == 0, "explore writes the lecture-size model's page: " + result.stdout.strip())
    check(result.returncode == 0 and sorted(page_data(page)["inside"]) == ["0"],
          "the lecture-size page holds q, k and v of one layer (the first; --layer picks another)")
    size = os.path.getsize(page) if os.path.exists(page) else 0
    check(0 < size < 3_000_000, f"the lecture-size page with a 64-character prompt is under 3 MB ({size} bytes)")


# ---- the DevTools protocol over a pipe ----------------------------------------------------------

class Browser:
    """Chromium with --remote-debugging-pipe: commands on fd 3, replies and events on fd 4.
    Every request a page makes pauses in the Fetch domain: the pages' own
    documents (`allowed`) go on, every other one is refused and kept in `blocked`."""

    def __init__(self, chromium, profile):
        to_r, self.to_w = os.pipe()  # os.pipe's ends close on exec: the child keeps only 3 and 4
        self.from_r, from_w = os.pipe()

        def pipes_as_3_and_4():  # in the child, before exec
            high_r, high_w = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
            os.close(high_r)
            os.close(high_w)

        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--remote-debugging-pipe", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--mute-audio",
             "--user-data-dir=" + profile, "--window-size=1200,900", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=pipes_as_3_and_4, close_fds=False)
        os.close(to_r)
        os.close(from_w)
        self.buffer = b""
        self.next_id = 0
        self.replies, self.events = {}, []
        self.allowed, self.blocked = set(), []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.time() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe (did it start?)")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def _post(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_w, json.dumps(message).encode() + b"\0")
        return self.next_id

    def _pump(self, deadline):
        message = self._read_message(deadline)
        if "id" in message:
            self.replies[message["id"]] = message
            return
        self.events.append(message)
        if message.get("method") == "Fetch.requestPaused":
            params, session = message["params"], message.get("sessionId")
            url = params["request"]["url"]
            if url in self.allowed:
                self._post("Fetch.continueRequest", {"requestId": params["requestId"]}, session)
            else:
                self.blocked.append((session, url))
                self._post("Fetch.failRequest", {"requestId": params["requestId"], "errorReason": "BlockedByClient"},
                           session)

    def send(self, method, params=None, session=None, timeout=60):
        sent = self._post(method, params, session)
        deadline = time.time() + timeout
        while sent not in self.replies:
            self._pump(deadline)
        reply = self.replies.pop(sent)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_for(self, method, session, since=0, timeout=30):
        deadline = time.time() + timeout
        i = since
        while True:
            while i < len(self.events):
                event = self.events[i]
                i += 1
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            self._pump(deadline)

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # it may close its pipe before it answers
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Page:
    """One tab, its console, errors and requests recorded from its opening on."""

    def __init__(self, browser, url):
        self.b, self.url = browser, url
        browser.allowed.add(url)
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.s = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for method in ["Runtime.enable", "Log.enable", "Page.enable", "Network.enable"]:
            self.send(method)
        self.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]})
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        since = len(browser.events)
        self.send("Page.navigate", {"url": url})
        browser.wait_for("Page.loadEventFired", self.s, since)
        self.settle()

    def send(self, method, params=None):
        return self.b.send(method, params, session=self.s)

    def settle(self):
        self.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")

    def js(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def requests(self):
        """URLs the page asked for, other than its own document."""
        sent = [e["params"]["request"]["url"] for e in self.b.events
                if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == self.s]
        return [u for u in sent if u != self.url] + [u for s, u in self.b.blocked if s == self.s]

    def errors(self):
        found = []
        for e in self.b.events:
            if e.get("sessionId") != self.s:
                continue
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                found.append("console." + p["type"] + ": " + json.dumps(p.get("args"))[:200])
            elif m == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(p["exceptionDetails"])[:300])
            elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                found.append("log: " + p["entry"]["text"][:200])
            elif m == "Network.loadingFailed":
                found.append("failed request: " + p.get("errorText", ""))
        return found

    def click(self, selector):
        """A real mouse click at the middle of the element."""
        box = self.js(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            e.scrollIntoView({{block: "center"}}); const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"]:
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1})
        self.settle()

    def key(self, key, code, key_code):
        for kind in ["rawKeyDown", "keyUp"]:
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": code,
                                                 "windowsVirtualKeyCode": key_code})
        self.settle()

    def screenshot(self, path, selector):
        """The page from its top down to the bottom of `selector` (at most 1000 px)."""
        bottom = self.js(f"""(() => {{ window.scrollTo(0, 0);
            return document.querySelector({json.dumps(selector)}).getBoundingClientRect().bottom; }})()""")
        clip = {"x": 0, "y": 0, "width": 1200, "height": min(1000, bottom + 16), "scale": 1}
        data = self.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
        with open(path, "wb") as f:
            f.write(base64.b64decode(data["data"]))
        print(f"wrote {path}")


# ---- the checks in the browser --------------------------------------------------------------------

def softmax(xs):
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    z = sum(e)
    return [x / z for x in e]


def head_view_checks(page, d, name):
    T, L, NH = len(d["tokens"]), d["n_layer"], d["n_head"]

    def expected(layer, only=None):
        return sorted((h, q, k) for h in range(NH) for q in range(T) for k in range(q + 1)
                      if d["weights"][layer][h][q][k] > THRESHOLD and (only is None or q == only))

    def drawn():
        return sorted(tuple(x) for x in page.js("""[...document.querySelectorAll('#head-svg line.attn-line')]
            .map(e => [+e.dataset.head, +e.dataset.q, +e.dataset.k])"""))

    all_lines = expected(0)
    check(drawn() == all_lines, f"{name}: the head view draws one line per weight above {THRESHOLD} "
                                f"({len(all_lines)} lines in layer 1)")
    q = T - 1
    page.click(f'#head-svg .tok-q[data-t="{q}"]')
    page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 1190, "y": 5})  # the pointer leaves
    page.settle()
    check(drawn() == expected(0, q) and drawn() != all_lines,
          f"{name}: clicking query token {q} draws only its {len(expected(0, q))} lines")
    if L > 1:
        page.js("(() => { const s = document.getElementById('head-layer'); s.value = '1';"
                " s.dispatchEvent(new Event('change')); })()")
        check(drawn() == expected(1, q), f"{name}: layer 2 with token {q} selected draws its lines")
        page.js("(() => { const s = document.getElementById('head-layer'); s.value = '0';"
                " s.dispatchEvent(new Event('change')); })()")
    page.click(f'#head-svg .tok-q[data-t="{q}"]')  # again: every token
    page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 1190, "y": 5})
    page.settle()
    check(drawn() == all_lines, f"{name}: clicking the token again draws every line")
    # The keyboard: focus a token and press Enter.
    page.js("document.querySelector('#head-svg .tok-q[data-t=\"2\"]').focus()")
    page.key("Enter", "Enter", 13)
    check(drawn() == expected(0, 2), f"{name}: Enter on focused token 2 draws only its lines")
    page.key("Enter", "Enter", 13)


def model_view_checks(page, d, name):
    T, L, NH = len(d["tokens"]), d["n_layer"], d["n_head"]
    page.click("#tab-model")
    cells = page.js("document.querySelectorAll('#model-grid .cell').length")
    check(cells == L * NH, f"{name}: the model view has {L} x {NH} = {L * NH} matrices (found {cells})")
    layer, head = L - 1, NH - 1
    page.click(f'#model-grid .cell[data-layer="{layer}"][data-head="{head}"]')
    opened = page.js("""(() => { const s = document.getElementById('matrix-svg');
        return [+s.dataset.layer, +s.dataset.head, s.querySelectorAll('rect.mcell').length,
                document.getElementById('matrix-title').textContent]; })()""")
    check(opened[:3] == [layer, head, T * (T + 1) // 2] and f"Layer {L}, head {NH}" in opened[3],
          f"{name}: clicking layer {L}, head {NH} opens its matrix of {T * (T + 1) // 2} cells ({opened})")
    q, k = T - 1, max(0, T - 3)
    title = page.js(f"document.querySelector('#matrix-svg rect.mcell[data-q=\"{q}\"][data-k=\"{k}\"] title').textContent")
    shown = float(title.rsplit("weight ", 1)[1])
    check(abs(shown - d["weights"][layer][head][q][k]) <= 1e-7, f"{name}: the enlarged cell ({q},{k}) reads {title!r}")
    page.click(f'#matrix-svg rect.mcell[data-q="{q}"][data-k="{k}"]')
    check(page.js("document.getElementById('matrix-readout').textContent") == title,
          f"{name}: hovering a cell shows its weight")


def query_view_checks(page, d, weights, name):
    T, NH, scale = len(d["tokens"]), d["n_head"], d["scale"]
    page.click("#tab-query")
    layer = int(sorted(d["inside"], key=int)[-1])
    head, t = NH - 1, T // 2
    page.js(f"""(() => {{ for (const [id, v] of [['q-layer', {layer}], ['q-head', {head}], ['q-pos', {t}]]) {{
        const s = document.getElementById(id); s.value = String(v); s.dispatchEvent(new Event('change')); }} }})()""")

    def shown():
        return [float(x) for x in page.js(
            "[...document.querySelectorAll('#q-table td.weight')].map(e => e.firstChild.textContent)")]

    for query in (t, t + 1):
        w = shown()
        ember = weights[(layer, head, query)] + [0.0] * (T - 1 - query)
        worst = max(abs(a - b) for a, b in zip(w, ember))
        check(len(w) == T and worst <= 1e-6,
              f"{name}: query {query} of layer {layer + 1}, head {head + 1}: the page's weights equal explore "
              f"--weights-out's (worst difference {worst:.1e})")
        total = float(page.js("document.getElementById('q-sum').textContent"))
        check(abs(total - 1) <= 1e-6 and abs(sum(ember) - 1) <= 1e-5,
              f"{name}: query {query}'s weights sum to 1 (page {total}, ember's {sum(ember):.7f})")
        # The page's numbers agree with the lecture's steps, recomputed here.
        inside = d["inside"][str(layer)]
        scores = inside["scores"][head][query]
        again = softmax([scores[j] * scale for j in range(query + 1)])
        check(max(abs(a - b) for a, b in zip(again, ember)) <= 1e-6,
              f"{name}: softmax(q.k x hs^-0.5, masked) from the page's scores gives the weights")
        q, ks, vs = inside["q"][head][query], inside["k"][head], inside["v"][head]
        check(all(abs(scores[j] - sum(a * b for a, b in zip(q, ks[j]))) <= 1e-4 * (1 + abs(scores[j]))
                  for j in range(T)), f"{name}: each q.k is the dot product of the page's q and k")
        out = [sum(ember[j] * vs[j][i] for j in range(T)) for i in range(len(q))]
        check(max(abs(a - b) for a, b in zip(out, inside["out"][head][query])) <= 1e-5,
              f"{name}: out is the weighted sum of v")
        if query == t:
            before = w
            page.click("#q-next")
    check(shown() != before, f"{name}: 'next' changes the query, and the weights with it")


def temperature_checks(page, d, name):
    page.click("#tab-predictions")
    T, k = len(d["tokens"]), d["top_k"]

    def shown():
        return page.js("""[...document.querySelectorAll('#pred-table tbody tr')].map(r =>
            [...r.querySelectorAll('.cand')].map(c => [+c.dataset.id, +c.querySelector('.p').textContent]))""")

    at_one = shown()
    page.js("document.getElementById('temp').focus()")
    for _ in range(10):  # ArrowLeft: one step of 0.05 each, 1 -> 0.5
        page.key("ArrowLeft", "ArrowLeft", 37)
    check(page.js("document.getElementById('temp-value').textContent") == "0.50",
          f"{name}: the arrow keys move the temperature slider to 0.50")
    at_half = shown()
    worst = 0.0
    for t in range(T):
        p = softmax([x / 0.5 for x in d["next"]["logits"][t]])
        for token, prob in at_half[t]:
            worst = max(worst, abs(prob - p[token]))
        top = sorted(p, reverse=True)[:k]
        check(len(at_half[t]) == k and all(abs(a[1] - b) <= 6e-5 for a, b in zip(at_half[t], top)),
              f"{name}: position {t}: the top {k} at T = 0.5 are softmax(logits / 0.5)'s") if t < 3 else None
    check(worst <= 6e-5, f"{name}: every probability shown at T = 0.5 is softmax(logits / 0.5) to 4 decimals "
                         f"(worst {worst:.1e})")
    check(at_half != at_one, f"{name}: the slider changed the distribution")


def choose(page, values):
    """Sets <select> elements as a user would: a value, then its change event."""
    for element, value in values.items():
        page.js(f"""(() => {{ const s = document.getElementById('{element}'); s.value = '{value}';
            s.dispatchEvent(new Event('change')); }})()""")
    page.settle()


def photograph(page, d, folder):
    """docs/explorer.md's pictures: layer 2, head 4 and the "t" of "dost" (docs/training.md reads them)."""
    layer, head = min(1, d["n_layer"] - 1), d["n_head"] - 1
    query = "".join(d["tokens"]).find("dost") + 3 if "dost" in "".join(d["tokens"]) else len(d["tokens"]) - 1
    page.click("#tab-head")
    choose(page, {"head-layer": layer})
    page.click(f'#head-svg .tok-q[data-t="{query}"]')
    page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 1190, "y": 5})
    page.screenshot(os.path.join(folder, "explorer_head.png"), "#head-svg")
    page.click("#tab-model")
    page.click(f'#model-grid .cell[data-layer="{layer}"][data-head="{head}"]')
    page.click(f'#matrix-svg rect.mcell[data-q="{query}"][data-k="{query - 3}"]')
    page.screenshot(os.path.join(folder, "explorer_model.png"), "#matrix-panel")
    page.click("#tab-query")
    choose(page, {"q-layer": layer, "q-head": head, "q-pos": query})
    page.screenshot(os.path.join(folder, "explorer_query.png"), "#q-out")
    page.click("#tab-predictions")
    page.js("(() => { const t = document.getElementById('temp'); t.value = '1'; t.dispatchEvent(new Event('input')); })()")
    page.screenshot(os.path.join(folder, "explorer_predictions.png"), "#pred-table")
    page.click("#tab-training")
    page.screenshot(os.path.join(folder, "explorer_training.png"), "#train-sample")


def browser_checks(root, build, tmp, chromium, checkpoint, screenshots):
    explore = os.path.join(build, "examples", "explore")
    pages = []
    if checkpoint:
        runs = [("checkpoint", checkpoint, None)]
    else:
        fast = train(build, os.path.join(tmp, "fast"))
        lecture = train(build, os.path.join(tmp, "lecture"), "--model", "lecture")
        runs = [("fast model", fast, os.path.join(tmp, "fast", "explore.html")),
                ("gpt.py's classes", lecture, None)]
    for name, ckpt, written in runs:
        page = os.path.join(tmp, name.replace(" ", "_").replace("'", "") + ".html")
        weights = os.path.join(tmp, "weights.txt")
        prompt = "CAMILLA:\nWhy dost thou" if checkpoint else "ANTONIO:\nI pray you"
        result = run([explore, "--checkpoint", ckpt, "--prompt", prompt, "--out", page, "--weights-out", weights])
        if result.returncode != 0:
            sys.exit(f"explore failed: {result.stderr}")
        pages.append((name, page, read_weights(weights)))
        if written:
            pages.append(("train_gpt's page", written, None))

    browser = Browser(chromium, os.path.join(tmp, "profile"))
    try:
        # The request counter counts: a page that asks for an image.
        probe = os.path.join(tmp, "probe.html")
        with open(probe, "w") as f:
            f.write('<!DOCTYPE html><img src="http://127.0.0.1:9/x.png"><p>probe</p>')
        p = Page(browser, "file://" + probe)
        check(len(p.requests()) >= 1, f"the request counter sees a page's request ({p.requests()})")

        for name, path, weights in pages:
            started = time.time()
            d = page_data(path)
            page = Page(browser, "file://" + path)
            check(page.js("document.title") == "ember attention explorer", f"{name}: the page loads")
            if weights is None:  # train_gpt's page: its training view
                page.click("#tab-training")
                evals = page.js("document.querySelectorAll('#train-svg circle.eval-point').length")
                check(evals == 2 * len(d["train"]["evals"]) and evals > 0,
                      f"{name}: the training view draws the {len(d['train']['evals'])} evaluations, train and val")
                with open(os.path.join(os.path.dirname(path), "sample.txt"), encoding="utf-8") as f:
                    sample = f.read().rstrip("\n")
                check(page.js("document.querySelector('#train-sample pre').textContent") == sample,
                      f"{name}: the training view shows the run's sample (out/sample.txt)")
            else:
                head_view_checks(page, d, name)
                model_view_checks(page, d, name)
                query_view_checks(page, d, weights, name)
                temperature_checks(page, d, name)
                if screenshots:
                    photograph(page, d, screenshots)
                # Every control can be reached with the keyboard.
                unreachable = page.js("""[...document.querySelectorAll('button, select, input, .tok-q')]
                    .filter(e => e.tabIndex < 0 && e.getAttribute('role') !== 'tab').length""")
                check(unreachable == 0, f"{name}: every control takes the keyboard's focus")
                page.click("#tab-head")
                page.js("document.getElementById('tab-head').focus()")
                page.key("ArrowRight", "ArrowRight", 39)
                check(page.js("document.getElementById('view-model').hidden") is False,
                      f"{name}: the arrow keys move between the views' tabs")
            page.settle()
            check(page.errors() == [], f"{name}: no console error, no failed request ({page.errors()[:3]})")
            check(page.requests() == [], f"{name}: no network request ({page.requests()[:3]})")
            print(f"       {name}: {os.path.getsize(path)} bytes, checked in {time.time() - started:.1f} s")
    finally:
        browser.close()


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("program", "browser"):
        sys.exit(__doc__)
    mode, root, build = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    rest = sys.argv[4:]
    option = lambda flag: rest[rest.index(flag) + 1] if flag in rest else None  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        if mode == "program":
            program_checks(root, build, tmp)
        else:
            chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            if not chromium:
                print("SKIP: Chromium is not installed (Debian: apt-get install chromium); the attention explorer "
                      "was not checked in a browser")
                return SKIP
            checkpoint, screenshots = option("--checkpoint"), option("--screenshots")
            browser_checks(root, build, tmp, chromium, checkpoint,  # as given: the page names it
                           screenshots and os.path.abspath(screenshots))
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
