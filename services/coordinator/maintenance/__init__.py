"""Table services of the leading coordinator: clustering, cleaning, timeline archival.

``plan.py`` decides (pure), ``view.py`` reads the table's committed files, ``clustering.py``
rewrites small files with pyarrow into a ``replacecommit``, ``cleaning.py`` hands replaced file
groups to the two-phase deleter, ``archival.py`` bounds the active timeline (both decide through
the sink log in the frame of ``decided.py``), ``routine.py`` runs them beside ingestion (never
blocking a commit) and reports metrics and the REST view.
"""
