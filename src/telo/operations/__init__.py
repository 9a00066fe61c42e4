"""Operations: what an operator or a program does to runs, written once for every front end.

The Python API, the CLI, the dashboard and the addressing kinds call these functions; front ends only parse
their input and format the answer. :mod:`.worker` runs a manifest's resumers (``telo worker``).
"""
