"""Ctrl-C on the ipu: ``KeyboardInterrupt`` within a second, in any wait.

Python runs its SIGINT handler between bytecodes, so a main thread blocked in jaxlib (waiting for a result) or in
the library (``transfer_from_outfeed``) would never get to it, and a program waiting for an infeed, a host callback
that never returns, or another process would wait on. When the ipu backend starts, :func:`install` asks the library
to count SIGINTs in front of Python's handler (``pjrt/interrupt.cc``): a Ctrl-C then fails every program running or
queued at that moment (``CANCELLED: ... was interrupted (SIGINT, Ctrl-C)``, on its results) and ends the wait. The
IPU is free for the next program.

What ends the wait is then an error raised by jaxlib, with Python's ``KeyboardInterrupt`` pending behind it (or
already dropped, if an audit hook or a gc callback ran Python's handler first). The places where jax waits
(``np.asarray(x)`` and the rest of ``ArrayImpl._value``, ``x.block_until_ready()``, ``jax.block_until_ready``,
``device.transfer_from_outfeed``) are wrapped so that the error of a Ctrl-C is raised there as one
``KeyboardInterrupt``, at once: a script stops as it does on Ctrl-C anywhere else. Reading an interrupted
program's results later gives the error itself.

A Ctrl-C while the compiler's front end runs (Python) raises ``KeyboardInterrupt`` from the compile, also when
Python's handler ran in a gc callback, which ignores the exception: the front end looks at the library's count.

If the process installs its own SIGINT handler (``signal.signal``), Ctrl-C is its alone: nothing is cancelled.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from typing import Any, Callable, Iterator

_installed = False
_MARK = "(SIGINT, Ctrl-C)"  # in the message of a wait or program that a Ctrl-C ended (pjrt/interrupt.cc)
_take: Any = None  # the library's JaxIpu_TakeInterrupt, looked up once (a lookup is an audited event)


def _let_signals_run() -> None:
    """A Python call: the interpreter runs pending signal handlers on entering it (every series)."""


def _raising_pending_interrupt(function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                return function(*args, **kwargs)
            except Exception as error:
                # If Python's pending handler runs first (at any call here), the outer clause takes the Ctrl-C.
                if _MARK in str(error) and _take():
                    _let_signals_run()  # Python's own KeyboardInterrupt, if it is still pending
                    # Else something ran Python's handler first and dropped its KeyboardInterrupt (an audit hook
                    # or a gc callback, where exceptions are ignored): raise it here, once.
                    raise KeyboardInterrupt from error
                raise  # not an interrupt, or the result of one already reported: the error itself
        except KeyboardInterrupt:
            _take()  # Python raised it on entering the handler above (3.8 looks before every instruction)
            raise

    for name in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, name, getattr(function, name))
        except (AttributeError, TypeError):  # jax's profiler wrappers may lack some
            pass
    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    wrapper._jax_ipu_interrupts = True  # type: ignore[attr-defined]
    return wrapper


def _wrap_waits() -> None:
    import jax
    from jax._src import api, array

    cls = array.ArrayImpl
    if not getattr(cls.block_until_ready, "_jax_ipu_interrupts", False):
        cls.block_until_ready = _raising_pending_interrupt(cls.block_until_ready)
        value = cls._value
        cls._value = property(_raising_pending_interrupt(value.fget), doc=value.__doc__)
    if not getattr(api.block_until_ready, "_jax_ipu_interrupts", False):
        wrapped = _raising_pending_interrupt(api.block_until_ready)
        api.block_until_ready = wrapped
        if getattr(jax, "block_until_ready", None) is getattr(wrapped, "__wrapped__", None):
            jax.block_until_ready = wrapped
    from jax_ipu.backend import feeds

    if not getattr(feeds.transfer_from_outfeed, "_jax_ipu_interrupts", False):
        feeds.transfer_from_outfeed = _raising_pending_interrupt(feeds.transfer_from_outfeed)


# A Ctrl-C that Python raised inside the compiler's front end, which runs as a callback of the library's compile:
# the callback can only report it as the compile's error, and jax_ipu raises it again where jax compiles
# (compiling_raises_interrupts). Per thread: compiles on other threads are theirs.
_compile_interrupted = threading.local()


def compile_interrupted() -> None:
    """The front end's callback caught a KeyboardInterrupt: the compile fails, and raises it (below)."""
    _compile_interrupted.value = True
    if _take is not None:
        _take()  # reported: a later wait or compile does not raise it again


# Python runs its SIGINT handler wherever the main thread is when it next looks, and that can be a gc callback (jax
# has one) or a __del__, which the front end's allocations run and where exceptions are ignored: the Ctrl-C would be
# lost and the compile would go on. The front end looks at the library's count of Ctrl-Cs between its ops.
_MAIN_THREAD = threading.main_thread().ident


def compile_started() -> None:
    """The front end begins: Ctrl-Cs before it were Python's to raise where they came."""
    if _take is not None and threading.get_ident() == _MAIN_THREAD:
        _take()


def compile_checkpoint() -> None:
    """Between the front end's ops: a Ctrl-C since :func:`compile_started` is raised here, as Python's pending
    ``KeyboardInterrupt`` or, if Python raised that where it was ignored, as a new one."""
    if _take is not None and threading.get_ident() == _MAIN_THREAD and _take():
        _let_signals_run()
        raise KeyboardInterrupt


@contextlib.contextmanager
def compiling_raises_interrupts() -> Iterator[None]:
    """Around an ipu compile: the error of a compile that a Ctrl-C interrupted is raised as ``KeyboardInterrupt``,
    as a Ctrl-C anywhere else in Python is."""
    _compile_interrupted.value = False
    try:
        yield
    except Exception as error:
        # (or a Ctrl-C the library counted that the front end never saw: Python raised it as the front end's callback
        # began, before it could report anything, and ctypes printed and dropped it)
        if getattr(_compile_interrupted, "value", False) or (
                _take is not None and threading.get_ident() == _MAIN_THREAD and _take()):
            raise KeyboardInterrupt from error
        raise
    finally:
        _compile_interrupted.value = False


def install(lib: ctypes.CDLL) -> bool:
    """Counts Ctrl-Cs in the library and raises them in jax's waits, if Python's own SIGINT handler is installed.
    True if it is (or was already) watching."""
    global _installed
    if _installed:
        return True
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return False  # the process's own handler (or SIG_DFL / SIG_IGN): Ctrl-C is its alone
    global _take
    if lib.JaxIpu_WatchInterrupts() != 0:
        return False
    _take = lib.JaxIpu_TakeInterrupt
    try:
        _wrap_waits()
    except (AttributeError, TypeError):  # pragma: no cover - a jax whose Array class is sealed
        pass
    _installed = True
    return True
