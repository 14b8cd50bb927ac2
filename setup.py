"""Optional compiled speed-ups: the hot pure-Python modules compiled by Cython.

Everything else about the package is in pyproject.toml. Each module listed here is plain
Python (it runs as is, and is the reference); a ``.pxd`` file next to it adds C types for
Cython, which compiles the same source into an extension module that Python imports in
place of the ``.py``. Same output either way (tests/test_compiled.py compares them).

A machine without a C compiler, or ``PULPIE_PURE_PYTHON=1``, installs the pure-Python
package: the extensions are optional and a failed build only prints a warning.
"""

import os

from setuptools import Extension, setup

COMPILED_MODULES = [
    "pulpie_spark.segment.simplify",
    "pulpie_spark.classify.blockmodel.features",
    "pulpie_spark.render.reconstruct",
    "pulpie_spark.render.markdown",
]


def extensions():
    if os.environ.get("PULPIE_PURE_PYTHON", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # a build without the declared build requirement
        return []
    modules = [
        Extension(name, [name.replace(".", "/") + ".py"], optional=True)
        for name in COMPILED_MODULES
    ]
    return cythonize(
        modules,
        language_level=3,
        # The .py stays the reference: its annotations are not C types, only the .pxd's
        # are (offsets typed there are C integers; division keeps Python's semantics).
        # ``if cython.compiled:`` branches leave the pure-Python code after them unreachable
        # in the extension, on purpose.
        compiler_directives={"annotation_typing": False, "warn.unreachable": False},
        quiet=True,
    )


setup(ext_modules=extensions())
