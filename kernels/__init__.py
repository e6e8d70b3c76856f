"""numba kernels of fastblox (imported as ``fastblox.kernels``).

Kernels take numpy arrays and scalars and return arrays; nothing here validates input (the
wrappers in ``fastblox`` do) and nothing compiles at import: each kernel compiles on first call,
once per signature, and is cached on disk (``NUMBA_CACHE_DIR`` moves the cache).
"""
