"""A real Prometheus server (Debian's ``prometheus``) for tests: started in
the foreground on a free port, scraping the given duomq brokers every second
and evaluating duomq's alert rules every second; queried over its HTTP API;
stopped (and its data removed) afterwards."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

from duomq.dev.ports import free_port

RULES = pathlib.Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "duomq-rules.yaml"


class PrometheusServer:
    def __init__(self, targets: list[str], interval_s: float = 1.0,
                 rule_files: list[pathlib.Path] | None = None,
                 token_file: str | None = None):
        """``token_file``: scrapes carry it as a bearer token (a secured
        broker's ``auth_dir/metrics.token``)."""
        self.dir = tempfile.mkdtemp(prefix="duomq-prometheus-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        rules = [str(p) for p in (rule_files if rule_files is not None else [RULES])]
        config = {"global": {"scrape_interval": f"{interval_s:g}s",
                             "evaluation_interval": f"{interval_s:g}s"},
                  "rule_files": rules,
                  "scrape_configs": [{"job_name": "duomq", "static_configs": [
                      {"targets": targets}],
                      **({"authorization": {"type": "Bearer", "credentials_file": token_file}}
                         if token_file else {})}]}
        self.config_path = os.path.join(self.dir, "prometheus.yml")
        with open(self.config_path, "w") as f:
            json.dump(config, f)          # JSON is YAML
        self.log_path = os.path.join(self.dir, "prometheus.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 30) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is not installed (make install installs Debian's)")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={self.config_path}",
                 f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"prometheus not ready in {timeout_s:g} s: {self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def api(self, path: str, **params) -> dict:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
            doc = json.loads(r.read())
        if doc.get("status") != "success":
            raise RuntimeError(f"prometheus {path} {params}: {doc}")
        return doc["data"]

    def query(self, promql: str) -> list[dict]:
        """An instant query's result: ``[{"metric": {...}, "value": [t, "v"]}, ...]``."""
        return self.api("query", query=promql)["result"]

    def value(self, promql: str) -> float | None:
        """The single value of an instant query (None when it has no result)."""
        result = self.query(promql)
        if not result:
            return None
        if len(result) > 1:
            raise RuntimeError(f"{promql!r} has {len(result)} series")
        return float(result[0]["value"][1])

    def alerts(self) -> list[dict]:
        return self.api("alerts")["alerts"]

    def targets_up(self) -> int:
        return len([t for t in self.api("targets")["activeTargets"] if t["health"] == "up"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)
