"""Helpers for task checkers and task environments (docs/TASKS.md).

- :func:`run_tests`: run test functions against the workspace's code in a fresh Python
  process and return the fraction that passed; :func:`fix_reward` rescales it so that the
  task's starting code scores 0 (partial credit for code tasks);
- :func:`serve`: a tiny threaded HTTP server on 127.0.0.1 and an ephemeral port, for web
  tasks; it stops when the ``with`` block ends;
- :func:`read_json`, :func:`read_csv`, :func:`norm`: forgiving readers for agent output.
"""

from __future__ import annotations

import contextlib
import csv
import http.server
import io
import json
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

_RUNNER = """\
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
ns = {}
results = {}
try:
    exec(compile(open(sys.argv[2], encoding="utf-8").read(), "hidden_tests.py", "exec"), ns)
except BaseException:
    print(json.dumps({"import_error": traceback.format_exc(limit=3)}))
    sys.exit(0)
for name, fn in list(ns.items()):
    if name.startswith("test_") and callable(fn):
        try:
            fn()
            results[name] = True
        except BaseException:
            results[name] = False
print(json.dumps({"results": results}))
"""


def run_tests(workspace: Path, tests: str, *, timeout_s: float = 60.0) -> float:
    """Fraction of the ``test_*`` functions in source ``tests`` that pass, with ``workspace``
    first on ``sys.path``; 0.0 when the code cannot be imported or the run times out.

    The tests are kept outside the workspace so the agent cannot change what is checked.

    Raises:
        ValueError: when ``tests`` defines no ``test_*`` function.
    """
    with tempfile.TemporaryDirectory(prefix="iclr-check-") as tmp:
        path = Path(tmp) / "hidden_tests.py"
        path.write_text(tests, encoding="utf-8")
        try:
            proc = subprocess.run(
                [sys.executable, "-B", "-c", _RUNNER, str(workspace), str(path)],
                cwd=workspace,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return 0.0
    lines = proc.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        return 0.0
    if "import_error" in report:
        return 0.0
    results = report.get("results", {})
    if not results:
        raise ValueError("the hidden tests define no test_* function")
    return sum(results.values()) / len(results)


def fix_reward(ctx, tests: str, *, timeout_s: float = 60.0) -> float:
    """Reward of a "fix the bug" task: ``(p - p0) / (1 - p0)``, at least 0, where ``p`` is the
    fraction of ``tests`` passing on the workspace and ``p0`` on the task's own ``files/``
    (the starting code). Doing nothing scores 0; making every test pass scores 1.
    """
    p = run_tests(ctx.workspace, tests, timeout_s=timeout_s)
    p0 = run_tests(ctx.task_dir / "files", tests, timeout_s=timeout_s)
    if p0 >= 1.0:
        return float(p >= 1.0)
    return round(max(0.0, (p - p0) / (1.0 - p0)), 6)


@contextlib.contextmanager
def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 on a free port in a daemon thread; yields the base URL
    (``http://127.0.0.1:PORT``) and shuts the server down on exit."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def pages_handler(pages: dict[str, str], on_post: Callable[[str, dict[str, list[str]]], tuple[int, str]] | None = None) -> type[http.server.BaseHTTPRequestHandler]:
    """A request handler serving ``pages`` (path -> HTML) on GET and calling
    ``on_post(path, form_fields) -> (status, html)`` on POST (urlencoded or JSON body)."""
    from urllib.parse import parse_qs, urlsplit

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the terminal quiet
            pass

        def _send(self, status: int, body: str) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path in pages:
                self._send(200, pages[path])
            else:
                self._send(404, "<h1>404 Not Found</h1>")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8", errors="replace")
            if "json" in (self.headers.get("Content-Type") or ""):
                try:
                    obj = json.loads(raw)
                    fields = {str(k): [str(v)] for k, v in obj.items()} if isinstance(obj, dict) else {}
                except json.JSONDecodeError:
                    fields = {}
            else:
                fields = parse_qs(raw, keep_blank_values=True)
            if on_post is None:
                self._send(405, "<h1>405 Method Not Allowed</h1>")
                return
            status, body = on_post(urlsplit(self.path).path, fields)
            self._send(status, body)

    return Handler


def norm(text: object) -> str:
    """Lower case, surrounding quotes and whitespace stripped, inner whitespace collapsed."""
    return " ".join(str(text).strip().strip("\"'`").lower().split())


def read_json(path: Path) -> object | None:
    """The JSON value in ``path`` (a ```json fence around it is tolerated), or ``None``."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def read_csv(path: Path) -> list[list[str]] | None:
    """Rows of the CSV file at ``path`` with cells stripped and blank rows dropped, or ``None``."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    rows = [[c.strip() for c in row] for row in csv.reader(io.StringIO(text))]
    return [r for r in rows if any(r)]
