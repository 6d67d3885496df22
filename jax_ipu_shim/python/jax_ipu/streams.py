"""Host data streams for on-device loops, built on ``io_callback``: what replaces infeed/outfeed in current jax.

Graphcore's users run a whole epoch as one device program (a ``lax.fori_loop``) that reads each batch from an
infeed queue and writes each loss to an outfeed queue (seed 000; TensorFlow's ``IPUInfeedQueue`` /
``IPUOutfeedQueue``). jax 0.4.13 spells that ``lax.infeed`` / ``lax.outfeed`` with ``device.transfer_to_infeed``;
current jax has neither. These queues give the same program shape on both series, through ordered ``io_callback``s:
inside the program ``infeed.get()`` returns the next host batch and ``outfeed.put(x)`` hands ``x`` to the host;
outside it ``infeed.put(batch)`` queues batches and ``outfeed.get()`` / ``outfeed.drain()`` take results. The
callbacks are ordered, so batches are read and results written in program order, once per loop iteration.

On the ipu each call is a host callback of the IPU program: the emulator stops the program at that step, copies
the arrays over the host link (counted and costed like any stream copy: ``jax_ipu.runtime.device_stats``) and goes
on. The queues are plain host objects: they work on cpu too, which is how the tests compare the two.

    infeed = InfeedQueue((jax.ShapeDtypeStruct((32, 784), jnp.float32), ...))
    outfeed = OutfeedQueue()

    def step(i, state):
        x, y = infeed.get()
        loss, state = update(state, x, y)
        outfeed.put(loss)
        return state

    for batch in batches: infeed.put(batch)
    state = jax.jit(lambda s: lax.fori_loop(0, n, step, s), backend="ipu")(state)
    losses = outfeed.drain()
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Deque, List

__all__ = ["InfeedQueue", "OutfeedQueue", "StreamError"]


class StreamError(RuntimeError):
    """A program read an empty infeed, or a value that does not match the queue's element spec."""


class InfeedQueue:
    """Host-to-device batches. ``put`` on the host; ``get()`` inside a jitted program returns the next one."""

    def __init__(self, element_spec: Any, name: str = "infeed"):
        import jax

        # The spec of one element: a pytree of jax.ShapeDtypeStruct (or anything with .shape and .dtype).
        self.element_spec = jax.tree_util.tree_map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), element_spec)
        self.name = name
        self._queue: Deque[Any] = collections.deque()
        self._lock = threading.Lock()

    def put(self, value: Any) -> None:
        """Queues one element (host side), checked against the element spec now rather than in the program."""
        import jax
        import numpy as np

        leaves, tree = jax.tree_util.tree_flatten(value)
        spec_leaves, spec_tree = jax.tree_util.tree_flatten(self.element_spec)
        if tree != spec_tree:
            raise StreamError(f"{self.name}: put a {tree}, but the queue carries {spec_tree}")
        arrays = []
        for i, (leaf, spec) in enumerate(zip(leaves, spec_leaves)):
            array = np.asarray(leaf)
            if array.shape != tuple(spec.shape) or array.dtype != np.dtype(spec.dtype):
                raise StreamError(f"{self.name}: leaf {i} is {array.dtype}{list(array.shape)}, the queue carries "
                                  f"{np.dtype(spec.dtype)}{list(spec.shape)}")
            arrays.append(array)
        with self._lock:
            self._queue.append(jax.tree_util.tree_unflatten(tree, arrays))

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)

    def _pop(self) -> Any:
        with self._lock:
            if not self._queue:
                raise StreamError(f"{self.name}: the program read an empty infeed queue (put every element the "
                                  "program reads before running it)")
            return self._queue.popleft()

    def get(self) -> Any:
        """Inside a jitted program: the next element, read from the host in program order."""
        from jax.experimental import io_callback

        return io_callback(self._pop, self.element_spec, ordered=True)


class OutfeedQueue:
    """Device-to-host results. ``put(x)`` inside a jitted program; ``get()`` / ``drain()`` on the host."""

    def __init__(self, name: str = "outfeed"):
        self.name = name
        self._queue: Deque[Any] = collections.deque()
        self._lock = threading.Lock()

    def _push(self, value: Any) -> None:
        import jax
        import numpy as np

        with self._lock:
            self._queue.append(jax.tree_util.tree_map(np.array, value))  # a copy: the buffer is the program's

    def put(self, value: Any) -> None:
        """Inside a jitted program: hands ``value`` (a pytree of arrays) to the host, in program order."""
        from jax.experimental import io_callback

        io_callback(self._push, None, value, ordered=True)

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)

    def get(self) -> Any:
        """The oldest result (host side); raises StreamError if none is queued."""
        with self._lock:
            if not self._queue:
                raise StreamError(f"{self.name}: the outfeed queue is empty (has the program run and finished?)")
            return self._queue.popleft()

    def drain(self) -> List[Any]:
        """Every queued result, oldest first (host side)."""
        with self._lock:
            out = list(self._queue)
            self._queue.clear()
            return out
