"""What the test suites, drills and benchmarks of this repository use to run
duomq for real (a pytest plugin, broker processes, the Kubernetes manifests
read as the kubelet would, pods as podman containers). Production code never
imports it, and it is not part of the installed package."""
