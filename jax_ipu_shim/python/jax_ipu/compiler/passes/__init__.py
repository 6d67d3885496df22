"""Rewrites of the program document, one module each, run by translate after it has written a function (before its
dead-code elimination). Each works on a block of the document (a function or a region: ``{"body": [...],
"results": [...]}``) and says in its header which XLA behaviour it reproduces and why it keeps the program's values
the same, or changes them only as XLA:CPU does."""
