"""Differential fuzzing: random valid kernels run on the interpreter and on a GPU target
(or compiled for every GPU arch), outputs compared with tolerances that follow from the
dtypes.  ``python -m polytile.fuzz --help``; docs/fuzzing.md.

Nothing in polytile imports this package: it is loaded only when asked for.
"""
