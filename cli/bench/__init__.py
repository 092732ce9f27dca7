"""``hudi-sink bench``: throughput, latency and memory of the sink against what Kafka and
Arrow alone do on the same machine in the same run (:mod:`.command`), and per-stage
micro-benchmarks (:mod:`.stages`). Method and latest results: ``docs/performance.md``."""
