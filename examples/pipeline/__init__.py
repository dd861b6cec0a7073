"""A shop's event pipeline on duomq and Spark.

Producers write click and order events to a topic (``events``, ``produce``);
a Structured Streaming job pinned to slave reads aggregates them per minute
of event time into Parquet with a checkpoint (``minutes``); a batch job reads
one day's range by store timestamp and reports it (``daily``). ``run`` ties
them together for ``make demo`` and prints Spark's figures beside what was
produced.
"""


def add_cluster_options(ap) -> None:
    """Where the jobs find duomq: --zookeeper and --cluster (default
    $DUOMQ_ZOOKEEPER and $DUOMQ_CLUSTER, as every duomq client), --topic."""
    from duomq.common.endpoint import resolve_endpoint
    zookeeper, cluster = resolve_endpoint(None, None)
    ap.add_argument("--zookeeper", default=zookeeper, help=f"(default: {zookeeper})")
    ap.add_argument("--cluster", default=cluster, help=f"(default: {cluster})")
    ap.add_argument("--topic", default="ShopEvents")
