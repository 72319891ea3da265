"""`cn3 experiment`: the papers' comparison tables as commands (spec -> cells -> runs -> report)."""
