"""``lax.rng_bit_generator`` on the ipu (jax's ``rbg``/``unsafe_rbg`` PRNGs), bit-identical to XLA:CPU.

jax lowers it to a ``stablehlo.rng_bit_generator`` on a u64[2] state bitcast from its u32[4] key. The IPU has no
64-bit integers, so for the "ipu" platform we lower the primitive instead to XLA's own bit generator written in u32
operations on the u32[4] key directly: XLA:CPU expands DEFAULT to Philox4x32-10 (rng_bit_generator_expander with
RNG_PHILOX), with the state's first u64 as the Philox key and the second one as the low half of the 128-bit counter
(the state reversed: the key is also the counter's high half). Output word 4i+j is word j of Philox(counter + i);
the new state is (key, counter_low + ceil(n/4)), the low 64 bits wrapping without carry, as XLA slices it.
RNG_THREE_FRY is XLA's ThreeFry generator (_three_fry_words), on jax's own threefry2x32 rounds.

Every op used (u32 multiply, shifts, xor, add, compare) is mapped and costed by the emulator; a 32x32->64-bit
product is built from 16-bit halves, as an IPU worker without a 64-bit multiplier would do it.
"""

from __future__ import annotations

import math
from typing import Any, List, Tuple

from jax_ipu.config import PLATFORM

_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # Philox4x32 multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # key schedule (Weyl) increments
_installed: List[bool] = []


def install_lowerings() -> None:
    if _installed:
        return
    from jax._src.interpreters import mlir
    from jax._src.lax import lax as lax_internal

    mlir.register_lowering(lax_internal.rng_bit_generator_p,
                           mlir.lower_fun(rng_bit_generator, multiple_results=True), platform=PLATFORM)
    try:  # the current series' threefry counts with a u64 iota (jax_threefry_partitionable, on by default there)
        from jax._src.random.prng import iota_2x32_shape_p
    except ImportError:  # jax 0.4.13 counts in u32 unless asked otherwise
        from jax._src.prng import iota_2x32_shape_p
    mlir.register_lowering(iota_2x32_shape_p, mlir.lower_fun(iota_2x32_shape, multiple_results=True),
                           platform=PLATFORM)
    mulhi_p = getattr(lax_internal, "mulhi_p", None)  # the current series (jax 0.4.13 has no lax.mulhi)
    if mulhi_p is not None:
        mlir.register_lowering(mulhi_p, mlir.lower_fun(mulhi, multiple_results=False), platform=PLATFORM)
    _installed.append(True)


def _u32(size: Any) -> Any:
    """A size (a number, or a symbolic dimension: the value it has when the program runs) as a u32 scalar."""
    import jax.numpy as jnp
    from jax import lax
    from jax._src import core

    if core.is_constant_dim(size):
        return jnp.uint32(int(size) & 0xFFFFFFFF)
    return lax.convert_element_type(core.dimension_as_value(size), jnp.uint32)


def _check_size(shape: Any) -> None:
    """An array on one IPU has far fewer than 2**32 elements; a symbolic shape is checked when it is known."""
    from jax._src import core

    if all(core.is_constant_dim(d) for d in shape) and math.prod(shape) >= 1 << 32:
        raise NotImplementedError(f"ipu: random bits for {tuple(shape)} ({math.prod(shape)} elements): at most "
                                  "2**32 - 1")


def iota_2x32_shape(*, shape: Any) -> List[Any]:
    """(high, low) u32 words of each element's row-major index, as jax's u64 iota gives them: the IPU has no 64-bit
    integers, and an array on one IPU has far fewer than 2**32 elements, so the high words are zero. Shapes may be
    symbolic (jax.export with shape polymorphism)."""
    import jax.numpy as jnp
    from jax import lax

    shape = tuple(shape)
    _check_size(shape)
    low = jnp.zeros(shape, jnp.uint32)
    stride: Any = 1
    for dim in reversed(range(len(shape))):
        low = low + lax.broadcasted_iota(jnp.uint32, shape, dim) * _u32(stride)
        stride = stride * shape[dim]
    return [jnp.zeros(shape, jnp.uint32), low]


def _mul_hi_lo(x: Any, k: Any) -> Tuple[Any, Any]:
    """(high, low) 32-bit words of the 64-bit product x * k (k a u32 array or a constant), from 16-bit partial
    products."""
    import jax.numpy as jnp

    u = jnp.uint32
    k = u(k) if isinstance(k, int) else k
    xl, xh = x & u(0xFFFF), x >> u(16)
    kl, kh = k & u(0xFFFF), k >> u(16)
    ll, lh, hl, hh = xl * kl, xl * kh, xh * kl, xh * kh
    cross = (ll >> u(16)) + (lh & u(0xFFFF)) + (hl & u(0xFFFF))
    high = hh + (lh >> u(16)) + (hl >> u(16)) + (cross >> u(16))
    return high, x * k


def mulhi(x: Any, y: Any) -> Any:
    """``lax.mulhi`` (the current series' Philox PRNGs): the high half of each product. jax lowers it through
    64-bit integers, which the IPU has not: 32-bit types from 16-bit partial products (a signed high word is the
    unsigned one less y where x < 0 and x where y < 0), narrower ones in a 32-bit product."""
    import jax.numpy as jnp
    from jax import lax

    dtype = x.dtype
    signed = jnp.issubdtype(dtype, jnp.signedinteger)
    bits = jnp.iinfo(dtype).bits
    if bits < 32:
        wide = jnp.int32 if signed else jnp.uint32
        return lax.convert_element_type((x.astype(wide) * y.astype(wide)) >> wide(bits), dtype)
    if bits > 32:
        raise NotImplementedError(f"ipu: lax.mulhi of {dtype} (the IPU has no 64-bit integers)")
    u = jnp.uint32
    ux, uy = (lax.bitcast_convert_type(v, u) for v in (x, y)) if signed else (x, y)
    high, _ = _mul_hi_lo(ux, uy)
    if signed:
        high = high - jnp.where(x < 0, uy, u(0)) - jnp.where(y < 0, ux, u(0))
        return lax.bitcast_convert_type(high, dtype)
    return high


def philox4x32(counter: List[Any], key: Tuple[Any, Any]) -> List[Any]:
    """Philox4x32 with 10 rounds, on four u32 arrays (least significant word first)."""
    import jax.numpy as jnp

    k0, k1 = key
    x = list(counter)
    for _ in range(10):
        h0, l0 = _mul_hi_lo(x[0], _M0)
        h1, l1 = _mul_hi_lo(x[2], _M1)
        x = [h1 ^ x[1] ^ k0, l1, h0 ^ x[3] ^ k1, l0]
        k0, k1 = k0 + jnp.uint32(_W0), k1 + jnp.uint32(_W1)
    return x


def rng_bit_generator(key: Any, *, shape: Any, dtype: Any, algorithm: Any, out_sharding: Any = None) -> List[Any]:
    del out_sharding  # the current series: one IPU holds the whole result
    import jax.numpy as jnp
    import numpy as np
    from jax._src.lax.lax import RandomAlgorithm

    dtype = np.dtype(dtype)
    if dtype not in (np.uint8, np.uint16, np.uint32, np.uint64):
        raise NotImplementedError(f"ipu: rng_bit_generator producing {dtype} is not supported; use unsigned bits")
    if key.shape != (4,) or key.dtype != jnp.uint32:
        raise NotImplementedError(f"ipu: rng_bit_generator needs jax's u32[4] key, got {key.dtype}{list(key.shape)}")
    shape = tuple(shape)
    k = [key[i] for i in range(4)]
    three_fry = algorithm == RandomAlgorithm.RNG_THREE_FRY
    if dtype == np.uint64:  # (jax_enable_x64: u64 emulated as pairs of u32 words)
        return _words64(k, shape, three_fry)
    if three_fry:
        _check_size(shape)
        state, words = _three_fry_words(k, shape)
    else:  # DEFAULT, PHILOX
        state, words = _philox_words(k, shape)
    # narrower types: the low bits of each 32-bit word, the state advancing as for u32 (as XLA:CPU does)
    return [state, words if dtype == np.uint32 else words.astype(dtype)]


def _words64(k: List[Any], shape: Tuple[Any, ...], three_fry: bool) -> List[Any]:
    """[new state, u64 words of `shape`], as XLA's 64-bit generators make them (prng.cc PhiloxRngBit64,
    ThreeFryRngBit64): Philox's are its 32-bit words for twice the elements, taken in pairs (low word first);
    ThreeFry's are the two output words of the counter state[1] + j for each element j (row-major) of the whole
    shape, unsplit, and the state advances by the element count."""
    import numpy as np
    from jax import lax

    n = math.prod(shape)
    if three_fry:
        _check_size(shape)
        low, high, state = _three_fry_rounds(k, shape)
    else:
        _check_size((2, n))
        state, words = _philox_words(k, (n, 2))
        low, high = words[..., 0].reshape(shape), words[..., 1].reshape(shape)
    u64 = np.uint64
    bits = (lax.convert_element_type(high, u64) << u64(32)) | lax.convert_element_type(low, u64)
    return [state, bits]


def _philox_words(k: List[Any], shape: Tuple[Any, ...]) -> List[Any]:
    """[new state, u32 words of `shape`] of rng_bit_generator with DEFAULT or PHILOX (k: the key's words): the
    module's docstring."""
    import jax.numpy as jnp
    from jax import lax

    n = math.prod(shape)  # a number, or symbolic (shape polymorphism)
    blocks = (n + 3) // 4
    # 128-bit counter words, least significant first: (state[1] low, state[1] high, state[0] low, state[0] high)
    i = lax.iota(jnp.uint32, blocks)  # blocks < 2**32: the index fits one word
    c0 = k[2] + i
    carry0 = (c0 < i).astype(jnp.uint32)
    c1 = k[3] + carry0
    carry1 = carry0 & (c1 == 0).astype(jnp.uint32)
    c2 = k[0] + carry1
    c3 = k[1] + (carry1 & (c2 == 0).astype(jnp.uint32))
    words = philox4x32([c0, c1, c2, c3], (k[0], k[1]))
    bits = lax.slice_in_dim(jnp.stack(words, axis=1).reshape(-1), 0, n).reshape(shape)
    low = k[2] + _u32(blocks)
    high = k[3] + (low < k[2]).astype(jnp.uint32)  # (blocks < 2**32: no carry from its high word)
    return [jnp.stack([k[0], k[1], low, high]), bits]


def _three_fry_words(k: List[Any], shape: Tuple[Any, ...]) -> List[Any]:
    """[new state, u32 words of `shape`] of rng_bit_generator with RNG_THREE_FRY (k: the key's words), as XLA
    expands it for 32-bit words (prng.cc ThreeFryRngBit32): the state's first u64 is the Threefry-2x32 key (low word
    first), its second the counter. The shape is split in halves along its first even dimension (else its first
    largest one): the counters state[1] + j, j the row-major index over the half shape, give Threefry-2x32-20's two
    words, which take the even and the odd places along that dimension (the last one dropped when it is odd); the
    new state is (key, state[1] + the half shape's size). A scalar is the first word of the counter state[1]. The
    rounds are jax's own threefry2x32 primitive (jax.random's: the same Random123 function). With symbolic
    dimensions (shape polymorphism) the split depends on their values, so each possible split is computed and the
    one XLA would take is selected when the program runs."""
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax._src import core

    if not shape:
        bits, state = _three_fry_split(k, (1,), 0)
        return [state, bits.reshape(())]
    constant = [core.is_constant_dim(d) for d in shape]
    if all(constant):
        even = [i for i, d in enumerate(shape) if d % 2 == 0]
        split = even[0] if even else int(np.argmax(shape))
        bits, state = _three_fry_split(k, shape, split)
        return [state, bits]
    # Symbolic dimensions: (split, whether XLA takes it) for every split it may take, first one true wins.
    value = [jnp.int32(d) if c else lax.convert_element_type(core.dimension_as_value(d), jnp.int32)
             for d, c in zip(shape, constant)]
    choices: List[Tuple[int, Any]] = []
    for i, (d, c) in enumerate(zip(shape, constant)):
        if c and d % 2 == 0:
            choices.append((i, jnp.bool_(True)))
            break
        if not c:
            choices.append((i, value[i] % 2 == 0))
    else:  # no dimension is even: the first largest
        for i in range(len(shape)):
            first_max = jnp.all(jnp.stack([value[i] > value[j] for j in range(i)] +
                                          [value[i] >= value[j] for j in range(i, len(shape))]))
            choices.append((i, first_max))
    bits, state = _three_fry_split(k, shape, choices[-1][0])
    for i, taken in reversed(choices[:-1]):
        b, st = _three_fry_split(k, shape, i)
        bits, state = jnp.where(taken, b, bits), jnp.where(taken, st, state)
    return [state, bits]


def _three_fry_split(k: List[Any], shape: Tuple[Any, ...], split: int) -> Tuple[Any, Any]:
    """(bits, new state) of _three_fry_words with the shape split along dimension `split`."""
    import jax.numpy as jnp
    from jax import lax

    d = shape[split]
    half = (d + 1) // 2
    first, second, state = _three_fry_rounds(k, shape[:split] + (half,) + shape[split + 1:])
    paired = jnp.stack([first, second], axis=split + 1)
    bits = paired.reshape(shape[:split] + (2 * half,) + shape[split + 1:])
    return lax.slice_in_dim(bits, 0, d, axis=split), state


def _three_fry_rounds(k: List[Any], shape: Tuple[Any, ...]) -> Tuple[Any, Any, Any]:
    """(first words, second words, new state): Threefry-2x32-20 with the key's first u64 on the counters state[1] + j,
    j the row-major index over `shape`; the state advances by its element count."""
    import jax.numpy as jnp
    from jax import lax

    try:
        from jax.extend.random import threefry2x32_p
    except ImportError:  # jax 0.4.13
        from jax._src.prng import threefry2x32_p
    count = math.prod(shape)
    j = lax.iota(jnp.uint32, count).reshape(shape)  # count < 2**32: the index fits one word
    low = k[2] + j
    high = k[3] + (low < j).astype(jnp.uint32)  # the u64 counter's carry
    first, second = threefry2x32_p.bind(k[0], k[1], low, high)
    new_low = k[2] + _u32(count)
    new_high = k[3] + (new_low < k[2]).astype(jnp.uint32)
    return first, second, jnp.stack([k[0], k[1], new_low, new_high])
