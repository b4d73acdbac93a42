"""The work behind scripts/verify_knowledge.py, one job a module (see that script for the command).

Imported as ``verifier``: running ``python scripts/verify_knowledge.py`` puts ``scripts/`` first on
the import path. The modules import each other relatively, so the package works under any name.
"""
