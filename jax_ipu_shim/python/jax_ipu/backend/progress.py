"""The compile progress bar (``TF_POPLAR_FLAGS=--show_progress_bar=true``), as Poplar prints it on stderr::

    Compiling jit_update [##############                ] 45% lowering onto tiles (2.3 s)

It appears only for compiles that take longer than :data:`DELAY_SECONDS`, so fast compiles stay silent. The flag
unset: shown when stderr is a terminal; ``true``: always (also when stderr is a file); ``false``: never.

A compile goes through stages, which the plugin names as it reaches them (:func:`stage`): the front end
(StableHLO -> IPU program, in Python), then lowering onto the tiles (graph, mapping, memory, in the emulator; one
call, reported as one stage), or loading from a cache. How long a stage will take is not known in advance, so
within a stage the bar creeps towards the stage's end, slowing as it goes, and jumps when the next stage begins.
A thread redraws the bar; the compile itself never waits for it.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from typing import Any, Iterator, List, Optional, Tuple

DELAY_SECONDS = 1.0  # compiles faster than this show nothing (tests lower it)
REFRESH_SECONDS = 0.1
WIDTH = 32

# stage -> (where it starts, where it ends) as fractions of the bar. The front end is most of a cold compile
# (measured on the bench's mlp_train_step); lowering is the rest.
STAGES = {
    "front end": (0.0, 0.75),
    "loading from the executable cache": (0.0, 0.25),
    "lowering onto tiles": (0.75, 1.0),
}

_local = threading.local()
_display_lock = threading.Lock()  # one bar on the terminal at a time; concurrent compiles stay quiet


def _enabled(show: Optional[bool], stream: Any) -> bool:
    if show is not None:
        return show
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class _Bar:
    def __init__(self, name: str, stream: Any) -> None:
        self.name = name
        self.stream = stream
        self.start = time.monotonic()
        self.stages: List[Tuple[str, float]] = []  # (stage, when it began)
        self.shown = False
        self._width = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jax-ipu-progress", daemon=True)

    def stage(self, name: str) -> None:
        with self._lock:
            if not self.stages or self.stages[-1][0] != name:
                self.stages.append((name, time.monotonic()))

    def _fraction(self, now: float) -> Tuple[float, str]:
        with self._lock:
            if not self.stages:
                return 0.0, "starting"
            name, began = self.stages[-1]
            previous = self.stages[-2][1] if len(self.stages) > 1 else self.start
        low, high = STAGES.get(name, (0.0, 1.0))
        # Expect a stage to last about as long as everything before it (at least a second): 1 - e^-t/tau creeps
        # towards the stage's end without reaching it.
        tau = max(1.0, began - previous)
        return low + (high - low) * 0.95 * (1.0 - math.exp(-(now - began) / tau)), name

    def _draw(self, fraction: float, label: str, now: float, end: str = "") -> None:
        filled = int(round(fraction * WIDTH))
        line = "Compiling {} [{}{}] {:3d}% {} ({:.1f} s)".format(
            self.name, "#" * filled, " " * (WIDTH - filled), int(fraction * 100), label, now - self.start
        )
        pad = " " * max(0, self._width - len(line))  # clear what a longer previous line left
        self._width = len(line)
        try:
            self.stream.write("\r" + line + pad + end)
            self.stream.flush()
        except (OSError, ValueError):  # a closed stderr must not fail the compile
            self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(REFRESH_SECONDS if self.shown else max(0.0, DELAY_SECONDS - self._elapsed())):
            if self._elapsed() >= DELAY_SECONDS:
                self.shown = True
                fraction, label = self._fraction(time.monotonic())
                self._draw(fraction, label, time.monotonic())

    def _elapsed(self) -> float:
        return time.monotonic() - self.start

    def begin(self) -> None:
        self._thread.start()

    def finish(self, failed: bool) -> None:
        self._stop.set()
        self._thread.join()
        # Compiles that took longer than the delay end with a full bar, even if the thread never drew one.
        if self.shown or self._elapsed() >= DELAY_SECONDS:
            self._draw(1.0 if not failed else self._fraction(time.monotonic())[0],
                       "failed" if failed else "done", time.monotonic(), end="\n")


@contextlib.contextmanager
def compiling(name: str, show: Optional[bool], stream: Any = None) -> Iterator[None]:
    """Shows a bar for the compile of ``name`` run inside the block, if it takes long enough and ``show`` allows
    (None: if the stream is a terminal)."""
    stream = sys.stderr if stream is None else stream
    if getattr(_local, "bar", None) is not None or not _enabled(show, stream) or not _display_lock.acquire(False):
        yield  # nested, off, or another thread's bar is up
        return
    bar = _Bar(name, stream)
    _local.bar = bar
    failed = True
    try:
        bar.begin()
        yield
        failed = False
    finally:
        _local.bar = None
        try:
            bar.finish(failed)
        finally:
            _display_lock.release()


def stage(name: str) -> None:
    """Marks the stage this thread's compile has reached (nothing if no bar is up)."""
    bar = getattr(_local, "bar", None)
    if bar is not None:
        bar.stage(name)
