"""Writing Apache Hudi Copy-on-Write tables (v6) from Python: on-disk layout (`layout`), names
(`naming`), Kafka offsets in commit metadata (`offsets`), the timeline (`table`), write
statistics (`write_stats`), table properties (`properties`) and replacecommits (`replace`).
Import the module you need; nothing is re-exported here."""
