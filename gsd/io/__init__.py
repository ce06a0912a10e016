"""Files and processes: atomic writes, run-folder locks, prompt hashing, arrow arrays without pandas,
lazy tables, progress bars, the shipped data, the user's input tables and numbers, heap reuse.

Nothing here knows the math of :mod:`gsd.core`; this package imports nothing on its own.
"""
