"""Where bucket snapshots are kept: the storage protocol, a directory of files, an object store.

``api`` is the protocol the tracker uses; ``file`` and ``objects`` implement it over the stored
form of ``format``, read through ``reads``.
"""
