"""The compiled kernels: one extension module, `mqtool._native`, built from Cython by the package's own build.

`optional=True`: on a machine without a C compiler the install still succeeds, and mqtool runs its
plain-Python kernels (`store/walk.py` and the other reference paths) after one warning.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

NATIVE = Extension(
    "mqtool._native",
    ["mqtool/_native.pyx"],
    include_dirs=["mqtool/_kernels"],
    depends=["mqtool/_kernels/crc32.h", "mqtool/_kernels/crc.pxi", "mqtool/_kernels/scan.pxi"],
    extra_compile_args=["-O3"],
    optional=True,
)

setup(ext_modules=cythonize([NATIVE], language_level=3, compiler_directives={
    "boundscheck": False, "wraparound": False, "initializedcheck": False, "cdivision": True}))
