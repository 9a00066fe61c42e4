"""Kinds' behaviour: the resource class of every built-in kind, by module (reference §3, §5–§7, §13, §14).

What each kind's configuration looks like is declared below, in :mod:`telo.specs`; this package holds what
the kinds *do*: the step kinds (:mod:`.run`), console, timer, Python functions, SQL, assertions, and the
durable kinds (:mod:`.workflow`, :mod:`.resumer`, :mod:`.addressing`, :mod:`.durable_kinds`,
:mod:`.journals`) built on the durable backend (:mod:`telo.durable`). :mod:`.controllers` is the table the
runtime is given to create resources from kind names.
"""
