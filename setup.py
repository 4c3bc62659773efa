"""The wheel's package list, the one setting pyproject.toml cannot express (the rest is there).

memprobe_core's and ui_common's packages are found as a `find` would; memprobe_dashboard (and
its pages) is the repository root that pyproject.toml's [tool.setuptools] package-dir maps, which
no `find` can add to its result (pyproject.toml says why the dashboard is laid out so). A found
list means a new subpackage of memprobe_core ships without an edit here.
"""

from setuptools import find_packages, setup

setup(
    # This file, by its path: setuptools leaves the setup script out of the package that holds it
    # (memprobe_dashboard, the root), but a PEP 517 build names another script.
    script_name=__file__,
    packages=[
        *find_packages(include=["memprobe_core", "memprobe_core.*", "ui_common", "ui_common.*"]),
        "memprobe_dashboard",
        "memprobe_dashboard.pages",
    ],
)
