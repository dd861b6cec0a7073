"""What ``kubectl`` asks of a cluster, answered over the podman pods of
``prod_pods.Cluster`` (Kubernetes cannot run here): the API server for the
verbs ``duomq rollout`` uses (get StatefulSets and pods as JSON, delete a
pod, exec in it), the StatefulSet controller (``OnDelete``: a deleted pod is
made again on the update revision, its image) and the kubelet (a deleted
pod's preStop hook, SIGTERM with the grace period; readiness from the
pod's own probe, every ``PROBE_S``). The test changes a StatefulSet's
template (``set_image``) as ``kubectl apply`` would. ``kubectl`` itself is
``testing.kubectl_shim``, reached through ``$DUOMQ_KUBE_DRIVER``
(``script``). Anything else is refused, so a rollout that asks more fails
here rather than in a cluster."""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from duomq.testing.pods import PodContainer

PROBE_S = 1.0


def revision(sts: str, image: str) -> str:
    return f"{sts}-{hashlib.sha256(image.encode()).hexdigest()[:10]}"


@dataclass
class PodState:
    pod: PodContainer
    sts: str
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    image: str = ""
    terminating: float | None = None        # when the delete came
    pending: bool = False                   # deleted and not yet made again
    ready: bool = False


class KubeDriver:
    def __init__(self, cluster):
        self.cluster = cluster
        self.namespace = cluster.sts["metadata"]["namespace"]
        name = cluster.sts["metadata"]["name"]
        self.sets = {name: {"doc": cluster.sts, "image": cluster.brokers[0].image}}
        self.pods = {p.name: PodState(p, name, image=p.image,
                                      ready=p.probe("readinessProbe") == 0)
                     for p in cluster.brokers}
        self.lock = threading.Lock()
        self.log: list[str] = []              # what was asked, for a failing test
        self._stop = threading.Event()
        driver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):                # noqa: N802 (http.server's name)
                argv = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                rc, out, err = driver.answer(argv)
                body = json.dumps({"rc": rc, "stdout": out, "stderr": err}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.threads = [threading.Thread(target=self.server.serve_forever, daemon=True),
                        threading.Thread(target=self._kubelet, daemon=True)]
        for t in self.threads:
            t.start()

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

    def script(self, where: pathlib.Path) -> str:
        """An executable ``kubectl`` that speaks to this driver."""
        path = where / "kubectl"
        path.write_text(f"#!/bin/sh\nexec {sys.executable} -m duomq.testing.kubectl_shim "
                        f'"$@"\n')
        path.chmod(0o755)
        return str(path)

    def set_image(self, sts: str, image: str) -> None:
        """A new template (its broker image), as `kubectl apply` of new
        manifests: with OnDelete, no pod changes until deleted."""
        with self.lock:
            self.sets[sts]["image"] = image

    # ------------------------------------------------------------ the kubelet
    def _kubelet(self) -> None:
        while not self._stop.wait(PROBE_S):
            for st in list(self.pods.values()):
                if st.terminating is None and not st.pending and st.pod.handle is not None:
                    ok = st.pod.probe("readinessProbe") == 0
                    with self.lock:
                        if st.terminating is None and not st.pending:
                            st.ready = ok

    def _delete(self, st: PodState) -> None:
        """preStop, SIGTERM with the grace period, then the controller makes
        the pod again on the update revision."""
        try:
            st.pod.pre_stop()
            st.pod.stop()
            with self.lock:
                st.pending, st.ready = True, False
                st.uid, st.image = str(uuid.uuid4()), self.sets[st.sts]["image"]
            st.pod.recreate(st.image)
        finally:
            with self.lock:
                st.terminating, st.pending = None, False

    # ------------------------------------------------------------ the API server
    def answer(self, argv: list[str]) -> tuple[int, str, str]:
        self.log.append(" ".join(argv))
        args, namespace = [], None
        it = iter(argv)
        for a in it:
            if a in ("--namespace", "-n"):
                namespace = next(it)
            elif a == "--context":
                next(it)
            else:
                args.append(a)
        if namespace not in (None, self.namespace):
            return 0, json.dumps({"kind": "List", "items": []}), ""
        try:
            if args[:2] == ["get", "statefulsets"] and args[2] == "-l":
                wanted = dict(kv.split("=", 1) for kv in args[3].split(","))
                items = [self._sts(n) for n, s in self.sets.items()
                         if wanted.items() <= s["doc"]["metadata"]["labels"].items()]
                return 0, json.dumps({"kind": "List", "items": items}), ""
            if args[:2] == ["get", "statefulset"]:
                if args[2] not in self.sets:
                    return 1, "", f'Error from server (NotFound): statefulsets.apps "{args[2]}"'
                return 0, json.dumps(self._sts(args[2])), ""
            if args[:2] == ["get", "pods"] and args[2] == "-l":
                wanted = dict(kv.split("=", 1) for kv in args[3].split(","))
                items = [self._pod(st) for st in self.pods.values()
                         if wanted.items() <= st.pod.labels.items()]
                return 0, json.dumps({"kind": "List", "items": items}), ""
            if args[:2] == ["delete", "pod"]:
                st = self.pods.get(args[2])
                if st is None:
                    return 1, "", f'Error from server (NotFound): pods "{args[2]}" not found'
                with self.lock:
                    if st.terminating is None:
                        st.terminating, st.ready = time.time(), False
                        threading.Thread(target=self._delete, args=(st,), daemon=True).start()
                return 0, f'pod "{args[2]}" deleted\n', ""
            if args[0] == "exec" and args[2] == "-c" and args[4] == "--":
                st = self.pods.get(args[1])
                if st is None or st.pending or st.pod.handle is None:
                    return 1, "", f"error: unable to upgrade connection: pod {args[1]} not found"
                rc, out = st.pod.exec(args[5:], 300)
                return rc, out, ""
        except (IndexError, ValueError):
            pass
        return 1, "", f"the test's kube driver does not serve: kubectl {' '.join(argv)}"

    def _sts(self, name: str) -> dict:
        s = self.sets[name]
        doc = json.loads(json.dumps(s["doc"]))
        update = revision(name, s["image"])
        mine = [st for st in self.pods.values() if st.sts == name]
        doc["status"] = {"replicas": len(mine), "readyReplicas": sum(st.ready for st in mine),
                         "updateRevision": update, "currentRevision": revision(
                             name, min(st.image for st in mine)),
                         "updatedReplicas": sum(revision(name, st.image) == update
                                                for st in mine)}
        return doc

    def _pod(self, st: PodState) -> dict:
        meta = {"name": st.pod.name, "namespace": self.namespace, "uid": st.uid,
                "labels": {**st.pod.labels, "controller-revision-hash": revision(st.sts, st.image),
                           "statefulset.kubernetes.io/pod-name": st.pod.name}}
        if st.terminating is not None:
            meta["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                      time.gmtime(st.terminating))
        return {"kind": "Pod", "metadata": meta,
                "spec": {"containers": [{"name": st.pod.container["name"], "image": st.image}]},
                "status": {"phase": "Pending" if st.pending else "Running",
                           "conditions": [{"type": "Ready",
                                           "status": "True" if st.ready else "False"}]}}
