"""duomq as a PySpark Python Data Source: batch and streaming reads pinned to
slaves (``readFrom``), and a sink.

    from duomq.client.spark import register
    register(spark)
    df = (spark.read.format("duomq").option("zookeeper", "127.0.0.1:2181")
          .option("cluster", "DefaultCluster").option("topic", "Clicks").load())

Options are those of Spark's Kafka source where they apply (see
``options.SourceOptions``). Needs the ``spark`` extra (pyspark, pyarrow).
"""

from duomq.client.spark.source import DuomqDataSource


def register(spark) -> None:
    """Register the ``duomq`` format with a SparkSession."""
    spark.dataSource.register(DuomqDataSource)


__all__ = ["DuomqDataSource", "register"]
