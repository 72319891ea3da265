"""The leaf utilities every layer imports (``cli``, ``cn3`` and ``data_prep`` alike): the shared rich
console and progress bars, atomic writes, file locks, the one bad-input error and the version.

They import nothing of cn3, cli or data_prep (``tests/test_layering.py``), so ``data_prep``, the
bottom layer, may import them without importing the library above it.
"""
