"""A real `clearance serve` for the integration tests, and an org on it.

The binary is $CLEARANCE_BIN or, when unset, built from the repository this
folder sits in (two levels up from sdk/python) with `go build`.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
START_DEADLINE = 60.0  # seconds for the server to log "listening"


class ClearanceServer:
    """One server process on 127.0.0.1 with a fresh data directory."""

    def __init__(self, *extra_flags: str):
        self._tmp = tempfile.TemporaryDirectory(prefix="clearance-sdk-py-")
        self.dir = Path(self._tmp.name)
        self.extra_flags = extra_flags
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.platform_key = ""
        self.log_lines: list[str] = []

    def start(self) -> "ClearanceServer":
        binary = os.environ.get("CLEARANCE_BIN") or self._build()
        data = self.dir / "data"
        self._stderr = open(self.dir / "stderr.log", "wb")
        self.proc = subprocess.Popen(
            [binary, "serve", "--data", str(data), "--addr", "127.0.0.1:0", *self.extra_flags],
            stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:  # keeps reading, so the server never blocks on a full pipe
            assert self.proc and self.proc.stdout
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace")
                self.log_lines.append(line)
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + START_DEADLINE
        while not self.url:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise RuntimeError(f"clearance serve did not log 'listening' within {START_DEADLINE:.0f} s")
            if line is None:
                raise RuntimeError("clearance serve exited before listening: " + self.stderr())
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == "listening":
                self.url = entry["url"]
        self.platform_key = (data / "platform.key").read_text().strip()
        return self

    def _build(self) -> str:
        out = self.dir / "clearance"
        subprocess.run(["go", "build", "-o", str(out), "./cmd/clearance"], cwd=REPO_ROOT, check=True)
        return str(out)

    def stderr(self) -> str:
        try:
            return (self.dir / "stderr.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def create_org(self, name: str) -> dict:
        """POST /v1/platform/orgs with the platform key: {org_id, api_key, …}."""
        req = urllib.request.Request(
            self.url + "/v1/platform/orgs", data=json.dumps({"name": name}).encode(), method="POST",
            headers={"Authorization": "Bearer " + self.platform_key, "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        if getattr(self, "_stderr", None):
            self._stderr.close()
        self._tmp.cleanup()
