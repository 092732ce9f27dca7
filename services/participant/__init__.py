"""Participant: consumes data topics, decodes records, writes Hudi base files."""
