"""Text embeddings for hybrid search: the engine protocol, the shipped model, vector maths.

Optional (``pip install 'ctxstore[embed]'``): nothing here imports NumPy or the tokenizer at
module level, so the paths that do not use vectors never load them.
"""
