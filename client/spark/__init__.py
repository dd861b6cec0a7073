"""duomq as a PySpark Python Data Source: batch and streaming reads pinned to
slaves (``readFrom``), and a sink.

    from duomq.client.spark import register
    register(spark)
    df = (spark.read.format("duomq").option("zookeeper", "127.0.0.1:2181")
          .option("cluster", "DefaultCluster").option("topic", "Clicks").load())

Options are those of Spark's Kafka source where they apply (see
``options.SourceOptions``). Needs the ``spark`` extra (pyspark, pyarrow).
"""

import os
import sys

from duomq.client.spark.progress import source_metrics
from duomq.client.spark.source import DuomqDataSource


def register(spark) -> None:
    """Register the ``duomq`` format with a SparkSession."""
    spark.dataSource.register(DuomqDataSource)


def local_session(app: str = "duomq", cores: int = 2, ui_port: int | None = None):
    """A ``local[cores]`` SparkSession with the ``duomq`` format registered:
    Python workers run this interpreter (they import duomq too), UTC session
    time, no console progress bars, few shuffle partitions, and no web UI
    unless ``ui_port`` is given (a pod's probes ask it)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(f"local[{cores}]").appName(app)
             .config("spark.ui.enabled", "false" if ui_port is None else "true")
             .config("spark.ui.port", str(ui_port or 4040))
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(cores))
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


__all__ = ["DuomqDataSource", "local_session", "register", "source_metrics"]
