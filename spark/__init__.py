"""Spark backfill: archived observations -> exporter metric history -> OpenMetrics -> promtool.

Module names avoid the standard library's and pyspark's, because `spark-submit spark/cli.py` puts
this folder first on sys.path.
"""
