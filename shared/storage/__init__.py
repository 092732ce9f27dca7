"""Table storage: one filesystem interface (fs) over local disk (durable) and object
stores (object_store, store_uri), and which one serves a base path (backend).
"""
