"""Sphinx configuration of the gsd documentation (``make docs``)."""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

# The notebook kernels talk to the build over CurveZMQ-encrypted sockets where the kernel says it
# can (its kernelspec's supported_encryption; ipykernel does).  Unencrypted (jupyter_client's
# default), every kernel logs a warning to the build's stderr: one line per notebook, which would
# bury the warnings that matter.  myst-nb has no setting for it, so the kernel manager's default
# policy is changed, for this process only.
import zmq  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402

import gsd  # noqa: E402  (the installed package is the one documented)

if zmq.has("curve"):  # a libzmq built without libsodium cannot encrypt: the warning stays
    KernelManager.class_traits()["transport_encryption"].default_value = "auto"

# Notebooks run in their fast mode (the kernels inherit this environment).
os.environ.setdefault("GSD_NOTEBOOK_FAST", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

project = "gsd"
author = "the gsd authors"
copyright = "the gsd authors, MIT licence"
release = version = gsd.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # ships MathJax in _static: equations render without a network
    "sphinx.ext.intersphinx",
    "numpydoc",
    "myst_nb",
    "sphinxarg.ext",
    "gsd_docs",
]

# Smart quotes without smart dashes: docutils would print `--input` in the command-line reference
# (sphinx-argparse's option lists) and in prose as "–input", an option that does not copy as typed.
smartquotes_action = "qe"

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
root_doc = "index"

# --- API reference
autosummary_generate = True
autosummary_ignore_module_all = False  # a module page lists exactly its __all__
templates_path = ["_templates"]
autodoc_default_options = {"members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_use_plots = False

intersphinx_mapping = {}  # offline build: no inventories fetched

# --- MyST and notebooks
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
# Markdown links "[text](#target)" (what the pages README links to use instead of roles, so that
# they read as Markdown outside the site too) resolve to labels, pages and Python objects only:
# sphinx-argparse's domain cannot answer such a query and would warn at every link.
myst_ref_domains = ["std", "py", "math"]
myst_dmath_double_inline = True
nb_execution_mode = os.environ.get("GSD_DOCS_NB_EXECUTION", "cache")
nb_execution_timeout = 300
nb_execution_in_temp = True  # what a notebook writes into its working folder stays out of the checkout
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
# Anything a notebook writes to stderr (a warning, a progress bar) is a build warning, hence an
# error under -W: a rendered page never shows a traceback-like block or a local path.
nb_output_stderr = "warn"

math_eqref_format = "({number})"
math_numfig = True
numfig = True

# --- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"gsd {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = ["_static"]
html_css_files = ["gsd.css"]
# A page with no sub-pages gets no left sidebar: the theme would show an empty "Section
# Navigation" there. Named one by one (a wildcard beside the theme's own would be ambiguous).
html_sidebars = {p.stem: [] for p in HERE.glob("*.md") if p.stem != "notebooks"}
html_last_updated_fmt = None


def _scratch_outputs(app):
    """Whatever the notebooks write goes beside the build, never into the checkout's figures/
    or sweeps/."""
    scratch = Path(app.doctreedir) / "notebook-outputs"
    os.environ.setdefault("GSD_FIGURES_DIR", str(scratch / "figures"))
    os.environ.setdefault("GSD_SWEEPS_DIR", str(scratch / "sweeps"))


def setup(app):
    app.connect("builder-inited", _scratch_outputs)
