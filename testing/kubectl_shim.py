"""``kubectl`` for the container tests: its arguments go to the driver
(``testing.kube_driver``) at ``$DUOMQ_KUBE_DRIVER``, which answers them over
the podman pods; its answer's output and exit status are this process's."""

from __future__ import annotations

import json
import os
import sys
import urllib.request


def main() -> int:
    req = urllib.request.Request(os.environ["DUOMQ_KUBE_DRIVER"],
                                 data=json.dumps(sys.argv[1:]).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as resp:
        answer = json.load(resp)
    sys.stdout.write(answer["stdout"])
    sys.stderr.write(answer["stderr"])
    return answer["rc"]


if __name__ == "__main__":
    sys.exit(main())
