"""The command line starts fast: parsing arguments loads nothing heavy, and the public API is lazy.

Each check runs a fresh interpreter, since this test process has long since imported everything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rooftop

HEAVY = ("numpy", "rich", "matplotlib", "jax")
SRC = Path(rooftop.__file__).resolve().parents[1]


def loaded_after(code: str) -> dict[str, bool]:
    """Which of HEAVY a fresh interpreter has imported after running ``code`` (with this checkout's src)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_cli_loads_nothing_heavy() -> None:
    assert loaded_after("import rooftop.cli.main") == dict.fromkeys(HEAVY, False)


def test_building_the_parser_loads_nothing_heavy() -> None:
    """``rooftop --help`` builds every subcommand's parser: still no numpy, rich, matplotlib or jax."""
    assert loaded_after("import rooftop.cli.main as m\nm.build_parser()") == dict.fromkeys(HEAVY, False)


def test_json_output_does_not_load_rich() -> None:
    code = "import contextlib, io\nimport rooftop.cli.main as m\nwith contextlib.redirect_stdout(io.StringIO()):\n"
    code += "    assert m.main(['chips', 'h100', '--json']) == 0"
    assert not loaded_after(code)["rich"]


def test_one_point_roofline_loads_only_what_it_prints() -> None:
    """``rooftop roofline ... --json``: no rich, no collective model (report/formulas names its types
    for the type checker only), no other chip's file parsed (catalog/chips/h100.toml alone)."""
    code = "import contextlib, io, sys\nimport rooftop.cli.main as m\nwith contextlib.redirect_stdout(io.StringIO()):\n"
    code += "    assert m.main(['roofline', '--chip', 'h100', '--flops', '1e12', '--bytes', '1GiB', '--json']) == 0\n"
    code += "from rooftop.hardware import catalog\n"
    code += "assert catalog._builtin.cache_info().currsize == 0, 'the whole chip catalog was read'\n"
    code += "for name in ('rooftop.cost.collectives', 'rooftop.hardware.topology', 'fractions', 'rich'):\n"
    code += "    assert name not in sys.modules, name"
    loaded_after(code)  # raises CalledProcessError when an assertion fails


def test_import_rooftop_is_lazy() -> None:
    assert loaded_after("import rooftop") == dict.fromkeys(HEAVY, False)


def test_import_jaxlink_loads_no_jax() -> None:
    """``import rooftop.jaxlink`` is cheap: ``analyze`` (and JAX with it) loads on first use."""
    assert loaded_after("import rooftop.jaxlink") == dict.fromkeys(HEAVY, False)


def test_jaxlink_analyze_is_the_function() -> None:
    """``rooftop.jaxlink.analyze`` is the function (as the README calls it), also after the bridge's
    submodules were imported directly."""
    code = "import rooftop.jaxlink, rooftop.jaxlink.calibrate, rooftop.jaxlink.profiling\n"
    code += "assert callable(rooftop.jaxlink.analyze), rooftop.jaxlink.analyze\n"
    code += "from rooftop.jaxlink import analyze\nfrom rooftop.jaxlink.profiling import analyze as direct\n"
    code += "assert analyze is direct and 'analyze' in dir(rooftop.jaxlink)"
    loaded_after(code)  # raises CalledProcessError when an assertion fails


def test_jaxlink_unknown_name_raises_attribute_error() -> None:
    import rooftop.jaxlink

    with pytest.raises(AttributeError, match="no_such_name"):
        rooftop.jaxlink.no_such_name  # noqa: B018


@pytest.mark.parametrize("name", sorted(rooftop.__all__))
def test_public_names_resolve(name: str) -> None:
    assert getattr(rooftop, name) is not None
    assert name in dir(rooftop)


def test_public_names_are_the_library_objects() -> None:
    from rooftop.cost.roofline import roofline
    from rooftop.plan.train.search import search

    assert rooftop.roofline is roofline
    assert rooftop.search_training is search


def test_unknown_public_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        rooftop.no_such_name  # noqa: B018


def test_parser_choices_match_the_library() -> None:
    """Choices the CLI spells out (so that --help need not import the planner) are the library's."""
    from rooftop.cli.models import REMAT_CHOICES
    from rooftop.cli.train import OBJECTIVES, OPTIMIZERS
    from rooftop.model.activations import REMAT_POLICIES
    from rooftop.model.memory import OPTIMIZERS as LIBRARY_OPTIMIZERS
    from rooftop.plan.train import search

    assert tuple(REMAT_POLICIES) == REMAT_CHOICES
    assert search.OBJECTIVES == OBJECTIVES
    assert tuple(LIBRARY_OPTIMIZERS) == OPTIMIZERS


def test_the_process_ends_without_freeing_but_flushed_and_atexit_run() -> None:
    """The command's own process ends at os._exit once its output is written (what it made is not freed
    object by object): stdout whole, status 0, the atexit handlers run; a call with argv returns."""
    code = (
        "import atexit, sys\natexit.register(lambda: print('atexit ran', file=sys.stderr))\n"
        "import rooftop.cli.main as m\n"
        "assert m.main(['roofline', '--chip', 'h100', '--flops', '1', '--bytes', '1', '--json']) == 0\n"
        "sys.argv = ['rooftop', 'roofline', '--chip', 'h100', '--flops', '1e12', '--bytes', '1GiB', '--json']\n"
        "sys.exit(m.main())\nprint('not reached')"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stderr == "atexit ran\n"
    first, second = done.stdout.split("\n{")
    assert json.loads(first)["flops"] == 1 and json.loads("{" + second)["flops"] == 1e12
