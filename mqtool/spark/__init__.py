"""Apache Spark engine for mqtool: Python Data Sources for store files and the `spark-audit` runner.

The only package that imports pyspark (`arrow.py` needs pyarrow only, so `--local --parquet` works
without Spark). Import it lazily: the rest of mqtool runs without Java.
"""
