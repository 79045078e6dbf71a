"""Parse budgets: how much memory reading one untrusted file may make the process allocate.

Every loader of a file the port did not write (pickles, ``.npz`` archives, ``.h5`` datasets)
works out, *before* it decompresses or builds anything, what the parse will allocate: a
pickle's opcodes are walked once without building objects (:mod:`legacy_states.prescan`),
an archive's declared member sizes are compared with what the state says the model holds
(:func:`groundhog_port.legacy.checkpoint.read_npz_arrays`), an HDF5 dataset's declared size is
taken in the dtype the loader converts it to (:func:`groundhog_port.legacy.h5guard.check_dataset`).
What the state itself declares (the model's own parameters) is not charged to the budget:
the state is what the user asked to run.  Everything else -- what a file could make us
allocate beyond that -- must fit in the budget, or the parse stops with one line naming the
file and the limit (exit 2).

Default: :data:`DEFAULT_MIB` (256 MiB).  Why: the acceptance bound of issue 25 is 512 MiB of
peak memory above the process's baseline for any hostile file; the estimates charge every
object at least its real size (see :mod:`legacy_states.prescan`), so half of that bound
leaves room for the loader's own copies.  Real GroundHog inputs are far below it: a
30,000-word vocabulary (about 1 MB of pickle) is estimated at about 12 MB.  For genuinely
huge archives, raise it with ``groundhog-port --parse-budget-mib N`` or the environment
variable ``GROUNDHOG_PARSE_BUDGET_MIB``.
"""

from __future__ import annotations

import os

from .errors import LegacyInputError

DEFAULT_MIB = 256
ENV = "GROUNDHOG_PARSE_BUDGET_MIB"
FLAG = "--parse-budget-mib"
_chosen_mib: int | None = None


def set_budget_mib(mib: int | str) -> None:
    """``--parse-budget-mib N``: the user's choice, kept for the whole process."""
    global _chosen_mib
    _chosen_mib = _valid(mib, FLAG)


def _valid(value: object, where: str) -> int:
    try:
        mib = int(value)  # type: ignore[call-overload]  # a TypeError is the answer
    except (TypeError, ValueError):
        raise LegacyInputError(
            None, f"{where} must be a whole number of MiB, got {str(value)[:40]!r}"
        ) from None
    if mib < 1:
        raise LegacyInputError(None, f"{where} must be at least 1 (MiB), got {mib}")
    return mib


def budget_mib() -> int:
    """The budget in MiB: the flag, else the environment variable, else the default."""
    if _chosen_mib is not None:
        return _chosen_mib
    if os.environ.get(ENV, "").strip():
        return _valid(os.environ[ENV], ENV)
    return DEFAULT_MIB


def budget_bytes() -> int:
    return budget_mib() << 20


def over_budget(path: object, what: str, need: int | None = None) -> LegacyInputError:
    """The error for a parse of ``path`` that would need ``need`` bytes (more than the
    budget, when not known) for ``what``."""
    size = f"about {_mib(need)} MiB, over" if need is not None else "more than"
    return LegacyInputError(
        path,
        f"{what} would take {size} the parse budget of {budget_mib()} "
        f"MiB (hostile or damaged file? for a genuinely huge one raise "
        f"it with {FLAG} N or {ENV}=N)",
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f}" if n >= 2**20 else f"{n / 2**20:.2f}"


def check(path: object, what: str, need: int) -> None:
    """Raise :func:`over_budget` unless ``need`` bytes fit in the budget."""
    if need > budget_bytes():
        raise over_budget(path, what, need)
