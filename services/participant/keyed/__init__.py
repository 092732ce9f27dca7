"""Keyed writes (``table.write_mode: upsert``): the pure logic the participant's upsert path
calls — which partition a key belongs to, what a record means as a change of its key (an
upsert, a tombstone, a Debezium event, a soft delete), and how a partition's buffered changes
collapse into one winner per key and are decided against the stored version."""
