"""hudi-sink: an exactly-once sink from Kafka into Apache Hudi tables.

The import packages live in the repository's top-level folders (``shared/``, ``services/``,
``cli/``); ``hudi_sink/`` links them so that everything installs under one name.
"""
