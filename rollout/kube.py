"""The cluster as ``duomq rollout`` sees it: ``kubectl`` commands, run
wherever the user's kubeconfig works (``--kubectl``, ``--context``,
``--namespace``). Only these: get StatefulSets and pods as JSON, delete a
pod without waiting, exec a command in a pod's container."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field

from duomq.common.errors import DuomqError


class KubectlError(DuomqError):
    """kubectl failed: missing, no cluster, refused."""


@dataclass
class Kubectl:
    binary: str = "kubectl"
    namespace: str | None = None
    context: str | None = None
    timeout_s: float = 60.0
    calls: list[list[str]] = field(default_factory=list)   # what it ran, for --dry-run's record

    def _argv(self, *args: str) -> list[str]:
        argv = [self.binary]
        if self.context:
            argv += ["--context", self.context]
        if self.namespace:
            argv += ["--namespace", self.namespace]
        return argv + list(args)

    def run(self, *args: str, timeout_s: float | None = None) -> subprocess.CompletedProcess:
        argv = self._argv(*args)
        self.calls.append(argv)
        try:
            return subprocess.run(argv, capture_output=True, text=True,
                                  timeout=timeout_s or self.timeout_s)
        except FileNotFoundError:
            raise KubectlError(f"{self.binary} is not installed (--kubectl names another)") \
                from None
        except subprocess.TimeoutExpired:
            raise KubectlError(f"`{' '.join(argv)}` did not finish in "
                               f"{timeout_s or self.timeout_s:g} s") from None

    def _json(self, *args: str) -> dict:
        p = self.run(*args, "-o", "json")
        if p.returncode != 0:
            raise KubectlError(f"`{' '.join(self._argv(*args))}` failed: "
                               f"{p.stderr.strip() or p.stdout.strip()}")
        try:
            return json.loads(p.stdout)
        except json.JSONDecodeError:
            raise KubectlError(f"`{' '.join(self._argv(*args))}` did not answer JSON") from None

    def statefulsets(self, selector: str) -> list[dict]:
        return self._json("get", "statefulsets", "-l", selector)["items"]

    def statefulset(self, name: str) -> dict:
        return self._json("get", "statefulset", name)

    def pods(self, selector: dict[str, str]) -> list[dict]:
        labels = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        return self._json("get", "pods", "-l", labels)["items"]

    def delete_pod(self, name: str) -> None:
        """Delete without waiting: the kubelet runs its preStop and stops it;
        the StatefulSet controller makes it again on the update revision."""
        p = self.run("delete", "pod", name, "--wait=false")
        if p.returncode != 0:
            raise KubectlError(f"cannot delete pod {name}: {p.stderr.strip()}")

    def exec(self, pod: str, container: str, argv: list[str],
             timeout_s: float) -> tuple[int, str]:
        """(exit status, stdout) of ``argv`` in the pod's container; stderr
        is appended when it failed."""
        p = self.run("exec", pod, "-c", container, "--", *argv, timeout_s=timeout_s + 10)
        return p.returncode, p.stdout + (p.stderr if p.returncode else "")
