"""The two sides of a check as objects, resolved once per check: what runs, where, and how it computes.

A check asks the backend registry (:mod:`convcheck.check.backends`) for each side once, when its plan is
resolved (:func:`convcheck.check.plan.resolve`), and from then on talks to these objects only: they run
(:meth:`Implementation.run`), say how they computed (:meth:`Implementation.computes`, what the error
model needs), whether they compute in float64, and what version of themselves a record names. An answer
computed elsewhere (an assert's, the lesson's stored output) is one more implementation,
:class:`GivenAnswer`, so given data goes through the same check as everything else.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .backends import GIVEN


class Implementation:
    """One side of a check. ``name``: what a record calls it (a backend's name, FILE.py:NAME, "yours",
    "stored"); ``device``: where it runs."""

    name: str
    device: str
    float64 = False  # its answer is a float64 computation: float64's rounding, not the checked type's
    user_function = False  # your function (FILE.py:NAME, module:NAME): its contract judges it, it may declare
    declares = False  # it may declare how it computes (a fast algorithm): your function, your answer

    def run(self, problem, inputs, **options) -> tuple[Any, dict]:
        """(its answer: a NumPy, torch or CuPy array; what it reports of the run)."""
        raise NotImplementedError

    def computes(self, problem, contract: str | None = None):
        """How it computes ``problem`` (:class:`convcheck.numerics.rounding.Computes`); ``contract``: what
        one that cannot say is allowed to have computed (:data:`convcheck.numerics.rounding.CONTRACTS`)."""
        raise NotImplementedError

    def own_versions(self) -> dict:
        """What a record names of its own version beyond the libraries' (your function: its file's hash)."""
        return {}

    def require_runnable(self, problem) -> None:
        """:class:`~convcheck.base.errors.Unsupported` where this device cannot run ``problem`` at all (a GPU
        without the checked type), asked before anything of the check is computed."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r} on {self.device})"


class Backend(Implementation):
    """A backend module of :mod:`convcheck.check.backends`, or your function's backend object."""

    def __init__(self, name: str, device: str, module):
        from .backends.user_function import UserFunction

        self.name, self.device, self.module = name, device, module
        self.user_function = isinstance(module, UserFunction)
        self.declares = self.user_function
        self.float64 = not self.user_function and bool(getattr(module, "float64", False))
        if self.float64:  # how a float64 reference computes, said once
            from ..numerics.rounding import FLOAT64

            self._float64 = replace(FLOAT64, path=f"{name} float64")
        self.ran = (None, None)  # (problem, what the run said it computed): a backend that says (torch's kernel)

    def run(self, problem, inputs, **options):
        """A backend whose report holds ``computes`` (what it ran: torch asks torch which kernel) is
        judged by that, as the run said it, not by asking again later."""
        answer, info = self.module.run(problem, inputs, self.device, **options)
        said = info.pop("computes", None)
        if said is not None:
            self.ran = (problem, said)
        return answer, info

    def computes(self, problem, contract: str | None = None):
        from ..numerics.rounding import ONCE, by_contract

        if self.float64:
            return self._float64
        if self.user_function:  # convcheck cannot ask your function: its contract says what it may do
            return by_contract(problem, contract, "your function")
        if self.ran[0] is problem:  # what the run said
            said = self.ran[1]
        else:
            own = getattr(self.module, "computes", None)  # torch asks torch which kernel it runs
            said = own(problem, self.device) if own is not None else ONCE
        stores = bool(getattr(self.module, "stores_epilogue", False))
        return said if said.stores_epilogue == stores else replace(said, stores_epilogue=stores)

    def own_versions(self) -> dict:
        own = getattr(self.module, "own_versions", None)
        return own() if own is not None else {}

    def require_runnable(self, problem) -> None:
        gate = getattr(self.module, "require_capability", None)  # cuDNN: what the GPU's compute capability runs
        if gate is not None:
            gate(problem)


class GivenAnswer(Implementation):
    """An answer computed elsewhere, handed in: an assert's (``yours``) or the lesson's stored output
    (``stored``). Running it returns the answer; how it computed is its contract's to say (your answer
    is modelled as torch computes, a stored output as a fused graph)."""

    declares = True

    def __init__(self, name: str, device: str, answer):
        self.name, self.device, self.answer = name, device, answer

    def run(self, problem, inputs, **options):
        return self.answer, {"implementation": GIVEN[self.name]}

    def computes(self, problem, contract: str | None = None):
        from ..numerics.rounding import by_contract

        return by_contract(problem, contract, GIVEN[self.name], stores_epilogue=self.name == "yours")


def named(name: str, device: str = "cpu") -> Implementation:
    """An implementation known by its name, for what the error model needs of it where nothing runs (a
    bound built for a record, a repro script, a diagnosis): the registry is asked here. "reference" is
    any float64 reference."""
    from . import backends

    if name in GIVEN:
        return GivenAnswer(name, device, None)
    if name == "reference":
        return Backend(name, device, backends.module("numpy"))
    return Backend(name, device, backends.module(name))
