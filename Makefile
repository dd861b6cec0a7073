# The two commands: `make demo` and `make test`. Each installs what is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install demo test unit lint docs image bench bench-beside-peers bench-beside-redis bench-quick proto clean

install:
	bash scripts/install.sh

demo: install
	$(PY) examples/demo.py

test: install
	bash scripts/test.sh

# duomq:<version> and duomq-spark:<version> with podman, offline if need be;
# REGISTRY=host/path: also pushed there, with the overlay lines that pin them
image:
	bash scripts/image.sh $(if $(REGISTRY),--push $(REGISTRY))

lint: install
	bash scripts/lint.sh

# the documentation site on http://127.0.0.1:8000 (mkdocs.yml, docs/)
docs: install
	$(VENV)/bin/mkdocs serve

unit: install
	bash scripts/test.sh tests -m "not integration"

bench: install
	$(PY) bench/run_all.py
	$(PY) bench/ha_bench.py
	$(PY) bench/spark_bench.py
	$(PY) bench/tag_filter_bench.py
	$(PY) bench/push_consumer_bench.py
	$(PY) bench/many_queues_bench.py
	$(PY) bench/latency_floor.py
	$(PY) bench/send_timeline.py
	$(PY) bench/zk_scale_bench.py
	$(PY) bench/handoff_bench.py
	$(PY) bench/key_index_bench.py
	$(PY) bench/metrics_bench.py
	$(PY) bench/auth_bench.py
	MODE=sync $(PY) bench/auth_bench.py
	$(PY) bench/tx_bench.py
	$(PY) bench/idempotence_bench.py
	$(PY) bench/share_bench.py
	$(PY) bench/timer_bench.py

bench-beside-peers: install   # the README's table: the peers' harness (Redis, NATS R3) and run_all.py in one sitting
	$(PY) bench/beside_peers.py

bench-beside-redis: install   # the same, Redis alone
	PEERS=redis $(PY) bench/beside_peers.py

bench-quick: install
	BENCH_QUICK=1 $(PY) bench/run_all.py
	BENCH_QUICK=1 $(PY) bench/ha_bench.py
	BENCH_QUICK=1 $(PY) bench/spark_bench.py
	BENCH_QUICK=1 $(PY) bench/tag_filter_bench.py
	BENCH_QUICK=1 $(PY) bench/push_consumer_bench.py
	BENCH_QUICK=1 $(PY) bench/many_queues_bench.py
	BENCH_QUICK=1 $(PY) bench/latency_floor.py
	BENCH_QUICK=1 $(PY) bench/zk_scale_bench.py
	BENCH_QUICK=1 $(PY) bench/handoff_bench.py
	BENCH_QUICK=1 $(PY) bench/key_index_bench.py
	BENCH_QUICK=1 $(PY) bench/metrics_bench.py
	BENCH_QUICK=1 $(PY) bench/auth_bench.py
	BENCH_QUICK=1 MODE=sync $(PY) bench/auth_bench.py
	BENCH_QUICK=1 $(PY) bench/tx_bench.py
	BENCH_QUICK=1 $(PY) bench/idempotence_bench.py
	BENCH_QUICK=1 $(PY) bench/timer_bench.py

proto: install
	bash scripts/gen_proto.sh

clean:
	rm -rf $(VENV) .demo *.egg-info .pytest_cache site
