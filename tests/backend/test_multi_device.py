"""Several IPUs (JAX_IPU_DEVICE_COUNT=N): copies between them over the IPU-Links, programs placed on any of them,
and pmap running one replica per IPU."""

from __future__ import annotations

import json

from _series import CURRENT_SERIES

TWO_IPUS = {"JAX_IPU_DEVICE_COUNT": "2"}


def run_json(python, code, env=TWO_IPUS):
    result = python(code, env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_device_put_between_ipus_goes_over_the_links_not_the_host(python):
    out = run_json(
        python,
        """
        import json
        import numpy as np, jax
        from jax_ipu import runtime
        ipu0, ipu1 = jax.devices("ipu")
        x_host = np.arange(250_000, dtype=np.float32)
        x0 = jax.device_put(x_host, ipu0)
        x0.block_until_ready()
        before = [runtime.device_stats(d) for d in (ipu0, ipu1)]
        x1 = jax.device_put(x0, ipu1)
        x1.block_until_ready()
        after = [runtime.device_stats(d) for d in (ipu0, ipu1)]
        x2 = jax.device_put(x0, ipu1)
        x2.block_until_ready()
        twice = runtime.device_stats(ipu1)
        delta = lambda key, i: after[i][key] - before[i][key]
        print(json.dumps({
            "device": next(iter(x1.devices())).id,
            "equal": bool((np.asarray(x1) == x_host).all()),
            "link_bytes": [delta("bytes_over_links", 0), delta("bytes_over_links", 1)],
            "link_cycles": [delta("link_cycles", 0), delta("link_cycles", 1)],
            "host_bytes": [delta("bytes_to_device", i) + delta("bytes_from_device", i) for i in (0, 1)],
            "host_cycles_before_read": delta("host_transfer_cycles", 1),
            "second_copy_cycles": twice["link_cycles"] - after[1]["link_cycles"],
        }))
        """,
    )
    assert out["device"] == 1 and out["equal"]
    assert out["link_bytes"] == [1_000_000, 1_000_000]
    assert out["host_bytes"] == [0, 0]  # no host round trip
    assert out["host_cycles_before_read"] == 0
    assert out["link_cycles"][0] > 0 and out["link_cycles"][0] == out["link_cycles"][1]
    assert out["second_copy_cycles"] == out["link_cycles"][1]  # the same copy costs the same


def test_link_cycles_grow_with_bytes_and_host_transfers_are_costed(python):
    out = run_json(
        python,
        """
        import json
        import numpy as np, jax
        from jax_ipu import runtime
        ipu0, ipu1 = jax.devices("ipu")
        cycles = []
        for n in (1_000, 1_000_000):
            before = runtime.device_stats(ipu1)["link_cycles"]
            jax.device_put(jax.device_put(np.ones(n, np.float32), ipu0), ipu1).block_until_ready()
            cycles.append(runtime.device_stats(ipu1)["link_cycles"] - before)
        host = []
        for n in (1_000, 1_000_000):
            before = runtime.device_stats(ipu0)["host_transfer_cycles"]
            np.asarray(jax.device_put(np.ones(n, np.float32), ipu0))
            host.append(runtime.device_stats(ipu0)["host_transfer_cycles"] - before)
        print(json.dumps({"link": cycles, "host": host}))
        """,
    )
    assert 0 < out["link"][0] < out["link"][1]
    assert 0 < out["host"][0] < out["host"][1]


def test_jit_on_the_second_ipu_runs_there(python):
    out = run_json(
        python,
        """
        import json
        import numpy as np, jax, jax.numpy as jnp
        from jax_ipu import runtime
        ipu0, ipu1 = jax.devices("ipu")
        f = jax.jit(lambda x, y: jnp.tanh(x) @ y, device=ipu1)
        rng = np.random.RandomState(0)
        x, y = rng.randn(16, 8).astype(np.float32), rng.randn(8, 4).astype(np.float32)
        out = f(x, y)
        want = np.tanh(x) @ y
        print(json.dumps({
            "device": next(iter(out.devices())).id,
            "close": bool(np.allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)),
            "runs": [runtime.device_stats(d)["executions"] for d in (ipu0, ipu1)],
            "program": runtime.last_execution(ipu1)["program"],
        }))
        """,
    )
    assert out["device"] == 1 and out["close"]
    assert out["runs"] == [0, 1]
    assert out["program"] == ("jit__lambda" if CURRENT_SERIES else "jit__lambda_")  # jax's module name


def test_pmap_runs_one_replica_per_ipu_and_matches_numpy(python):
    out = run_json(
        python,
        """
        import json
        import numpy as np, jax, jax.numpy as jnp
        from jax_ipu import runtime
        ipus = jax.devices("ipu")
        f = jax.pmap(lambda x, w: jnp.sin(x @ w) + 1, in_axes=(0, None), backend="ipu")
        rng = np.random.RandomState(1)
        x, w = rng.randn(2, 32, 16).astype(np.float32), rng.randn(16, 8).astype(np.float32)
        out = f(x, w)
        want = np.sin(x @ w) + 1
        shards = sorted(s.device.id for s in out.addressable_shards)
        # The replicas stay in step over many non-blocking launches.
        y = x
        g = jax.pmap(lambda v: v * 0.5 + 1, backend="ipu")
        for _ in range(20):
            y = g(y)
        want_y = x
        for _ in range(20):
            want_y = want_y * np.float32(0.5) + np.float32(1)
        chain = bool(np.allclose(np.asarray(y), want_y, rtol=1e-5))  # waits for the last launch
        print(json.dumps({
            "close": bool(np.allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)),
            "shards": shards,
            "runs": [runtime.device_stats(d)["executions"] for d in ipus],
            "chain": chain,
        }))
        """,
    )
    assert out["close"] and out["chain"]
    assert out["shards"] == [0, 1]
    assert out["runs"] == [21, 21]  # every launch ran once on each IPU


def test_pmap_over_more_replicas_than_ipus_is_refused(python):
    result = python(
        """
        import numpy as np, jax
        jax.pmap(lambda x: x + 1, backend="ipu")(np.zeros((3, 2), np.float32))
        """,
        TWO_IPUS,
    )
    assert result.returncode != 0
    if CURRENT_SERIES:  # jax refuses it itself, before compiling, as on every backend
        assert "implies that array axis 0 is partitioned 2 times, but the dimension size is 3" in result.stderr
    else:
        assert "requires 3 logical devices, but only 2 XLA devices are available" in result.stderr
