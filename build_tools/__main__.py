"""Command line of the build tools; nox sessions call these (run from the repository root).

    python -m build_tools build [--out dist] [--series 0.4.13] [--cxx g++] [--jobs N] [--if-stale]
    python -m build_tools fetch                 # download + verify every pinned upstream file
    python -m build_tools check-patches         # every series applies to its pristine source; headers complete
    python -m build_tools pristine jax DEST     # write the pristine tree a series applies to (for editing patches)
    python -m build_tools native [--out DIR]    # only the native library
    python -m build_tools build-program SOURCE.cc [...] [--out FILE] [--series S]  # a C++ graph-API program
    python -m build_tools build-sanitized --lane asan|tsan [--series S] [--out DIR] [--jobs N]  # for nox -s sanitize
    python -m build_tools clean                 # remove build/ and dist/
    python -m build_tools release [--pages-url URL] [--url URL] [--jobs N]   # dist/jax-ipu-<version>.zip
    python -m build_tools reproduce [--jobs N] [--share-cache] [--keep DIR]  # two clean builds, byte-identical?
    python -m build_tools lint [clang-format|pins-agree|citations ...]       # the checks of nox -s lint
    python -m build_tools compare DIR_A DIR_B   # wheels of the same name in both: byte-identical?
    python -m build_tools wheelhouse [--dest DIR]   # every locked wheel in one folder, for offline sessions
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

from build_tools import build, fetch, native, patches
from build_tools.pins import load


def _errors() -> tuple:
    from build_tools.release import ReleaseError
    from build_tools.wheels import WheelError

    return (build.BuildError, fetch.FetchError, native.NativeBuildError, patches.PatchError, WheelError, KeyError,
            ReleaseError)


def check_patches(series_name: str | None) -> int:
    series = load().get_series(series_name)
    failures = 0
    for artifact in (series.jax, series.jaxlib):
        problems = patches.check_headers(artifact)
        with tempfile.TemporaryDirectory(prefix=f"check-{artifact.package}-") as tmp:
            tree = patches.extract_pristine(artifact, Path(tmp) / "tree")
            try:
                applied = patches.apply_series(artifact, tree)
            except patches.PatchError as e:
                problems.append(str(e))
                applied = []
        for p in problems:
            print(f"[check-patches] FAIL {p}")
        failures += len(problems)
        if not problems:
            print(f"[check-patches] ok: {len(applied)} patch(es) of patches/{artifact.package}/{artifact.version} "
                  f"apply cleanly to {artifact.filename}")
    return 1 if failures else 0


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(prog="python -m build_tools", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, default=build.DIST)
    b.add_argument("--series", action="append",
                   help="a series of build_tools/pins.toml (repeatable; default: every series)")
    b.add_argument("--cxx", help="development compiler instead of zig (also $JAX_IPU_CXX); wheel is not portable")
    b.add_argument("--jobs", type=int)
    b.add_argument("--if-stale", action="store_true", help="do nothing if dist/ was built from the current inputs")
    f = sub.add_parser("fetch")
    f.add_argument("--series")
    c = sub.add_parser("check-patches")
    c.add_argument("--series")
    p = sub.add_parser("pristine")
    p.add_argument("project", choices=["jax", "jaxlib"])
    p.add_argument("dest", type=Path)
    p.add_argument("--series")
    n = sub.add_parser("native")
    n.add_argument("--out", type=Path, default=build.BUILD / "native")
    n.add_argument("--series")
    n.add_argument("--cxx")
    bp = sub.add_parser("build-program", help="a C++ program of the graph API (ipu/poplar.h) with the emulator's "
                        "objects (examples/cpp)")
    bp.add_argument("sources", nargs="+", type=Path)
    bp.add_argument("--out", type=Path, help="default: build/programs/<first source's name>")
    bp.add_argument("--series")
    bp.add_argument("--cxx")
    bp.add_argument("--jobs", type=int)
    bs = sub.add_parser("build-sanitized", help="libjax_ipu.so under ASan+UBSan or TSan (build_tools/sanitize.py)")
    bs.add_argument("--lane", required=True, help="asan (address + undefined) or tsan (thread)")
    bs.add_argument("--series")
    bs.add_argument("--out", type=Path, help="default: build/sanitize/<lane>/<series>/")
    bs.add_argument("--cxx", help="compiler with the sanitizer runtimes (default: g++)")
    bs.add_argument("--jobs", type=int)
    sub.add_parser("clean")
    r = sub.add_parser("release")
    r.add_argument("--series")
    r.add_argument("--jobs", type=int)
    r.add_argument("--pages-url", help="also write dist/pages/wheels.html linking our wheels under this URL")
    r.add_argument("--url", default="the jax-ipu repository", help="where INSTALL says the source is")
    r.add_argument("--dist", type=Path, default=build.DIST)
    r.add_argument("--tag", help="the git tag being released: must be v<version>")
    r.add_argument("--no-build", action="store_true", help="take the wheels in --dist as they are (built elsewhere)")
    li = sub.add_parser("lint")
    li.add_argument("checks", nargs="*", help="clang-format, pins-agree, citations (default: all)")
    wh = sub.add_parser("wheelhouse")
    wh.add_argument("--dest", type=Path)
    cm = sub.add_parser("compare")
    cm.add_argument("dir_a", type=Path)
    cm.add_argument("dir_b", type=Path)
    rp = sub.add_parser("reproduce")
    rp.add_argument("--jobs", type=int)
    rp.add_argument("--share-cache", action="store_true", help="one cache for both builds (objects reused: quick)")
    rp.add_argument("--keep", type=Path, help="build in this directory and keep it")
    args = parser.parse_args(argv)

    try:
        if args.command == "build":
            build.build_all(args.out, args.series, args.cxx, args.jobs, args.if_stale)
        elif args.command == "fetch":
            for artifact in load().get_series(args.series).artifacts:
                print(f"[fetch] ok {fetch.fetch(artifact)}")
        elif args.command == "check-patches":
            return check_patches(args.series)
        elif args.command == "pristine":
            series = load().get_series(args.series)
            print(patches.extract_pristine(getattr(series, args.project), args.dest))
        elif args.command == "native":
            native.build_library(load().get_series(args.series), args.out, cxx=args.cxx)
        elif args.command == "build-program":
            print(native.build_program(load().get_series(args.series), args.sources, args.out, args.cxx, args.jobs))
        elif args.command == "build-sanitized":
            from build_tools import sanitize

            lane = sanitize.lane(args.lane)
            lib = sanitize.build(lane, load().get_series(args.series), args.out, args.jobs, args.cxx)
            env = sanitize.run_env(lane, lib, args.cxx)
            print("run the tests with:\n  " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
        elif args.command == "release":
            from build_tools import release

            release.release(args.dist, args.series, args.pages_url, args.jobs, args.url,
                            build_first=not args.no_build, tag=args.tag)
        elif args.command == "lint":
            from build_tools import lint

            return lint.main(args.checks)
        elif args.command == "wheelhouse":
            from build_tools import release

            release.wheelhouse(args.dest)
        elif args.command == "compare":
            from build_tools import reproduce

            return reproduce.compare(args.dir_a, args.dir_b)
        elif args.command == "reproduce":
            from build_tools import reproduce

            return reproduce.reproduce(args.jobs, args.share_cache, args.keep)
        elif args.command == "clean":
            for removed in build.clean():
                print(f"removed {removed}")
    except _errors() as e:
        print(f"\nerror: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
