"""The fixtures chaos tests use are duomq.testing.pytest_plugin's, which
pyproject's addopts loads once for both test folders (one ZooKeeper and one
SparkSession per worker, not one per folder)."""
