"""The relationship graph: walks over the index (``traverse``) and the SCC view (``scc``).

``traverse`` answers hot-path questions (provenance, neighbourhoods) in SQL over the index;
``scc`` computes and stores the strongly connected components with networkx, imported
inside the functions that need it. This package module imports nothing, so a hook pays
only for the module it uses.
"""
