"""The hudi-sink command line and the tools around the services: the entry point (main),
the development stack (dev, broker), the demo producer, table and config commands, the bench.
"""
