"""Imports the modules a probe travels with from memory (stdlib only, Python 3.8+).

A probe run by hand imports its modules (kg_common, kg_pickle, ...) from its own folder.  Sent to a host, they
travel as text beside it: one-shot in the program piped to ``python3 -``, through the resident helper by hash, on
every node of a Fleet step in the packed program.  ``install`` puts a finder first on ``sys.meta_path`` over a dict
of name -> source text (or a code object compiled ahead), so the modules import each other in any order, as plain
imports do, and a stray ``kg_common.py`` in the remote's working folder never shadows the one that travelled.
"""
import sys


class Modules(object):
    """A ``sys.meta_path`` finder and loader over ``{name: source text or code object}``."""

    def __init__(self, sources):
        self.sources = sources

    def find_spec(self, name, path=None, target=None):
        if name not in self.sources:
            return None
        from importlib.machinery import ModuleSpec

        # A loader by protocol (create_module, exec_module): importlib.abc.Loader is not imported for the type.
        return ModuleSpec(name, self, origin=name + ".py")  # pyright: ignore[reportArgumentType]

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module):
        name = module.__name__
        code = self.sources[name]
        if isinstance(code, str):
            code = compile(code, name + ".py", "exec", dont_inherit=True)
        module.__file__ = name + ".py"
        exec(code, module.__dict__)


def install(sources):
    """Makes ``sources`` importable ahead of anything on sys.path; returns the finder."""
    finder = Modules(sources)
    sys.meta_path.insert(0, finder)
    return finder
