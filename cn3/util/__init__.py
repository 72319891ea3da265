"""The leaf utilities every layer imports (``cli``, ``cn3`` and ``data_prep`` alike): console and
progress bars, atomic writes, file locks, errors, the version. They import nothing of cn3, cli or
data_prep (``tests/project/test_layering.py``).
"""
