"""The gates: section of a params file: validated with the file, a mistake naming the file and the key."""

from __future__ import annotations

import pytest
import yaml

from bench.config.params import load_sweep
from bench.core.errors import ParamsError
from bench.gates import Gates, merge
from bench.testing.grids import bench, grid


@pytest.mark.parametrize(("gates", "said"), [
    ({"max_drops": 0.2, "baseline": "runs/main"}, "gates.max_drops: unknown key 'max_drops' (allowed: min, max_drop"),
    ({"max_drop": -0.1, "baseline": "runs/main"}, "gates.max_drop: Input should be greater than or equal to 0"),
    ({"max_drop": 0.2}, "gates: max_drop compare with a baseline run: set baseline"),
    ({"win_rate_min": 1.5, "baseline": "b"}, "gates.win_rate_min: Input should be less than or equal to 1"),
    ({"strict": True}, "gates: declares no gate: set at least one of min, max_drop, win_rate_min, agreement_min"),
    ({"min": "high"}, "gates.min: Input should be a valid number"),
    ({"min": float("nan")}, "gates.min: must be a finite number"),
])
def test_a_bad_gates_section_is_a_params_error_naming_the_file_and_the_key(tmp_path, gates, said):
    path = grid(tmp_path / "g.yaml", "http://127.0.0.1:9/v1", gates=gates)
    with pytest.raises(ParamsError) as err:
        load_sweep(path)
    assert f"{path}: {said}" in str(err.value)


def test_bench_validate_and_bench_gate_refuse_it_with_exit_2(tmp_path):
    path = grid(tmp_path / "g.yaml", "http://127.0.0.1:9/v1", gates={"min": 3, "maxdrop": 1})
    for args in (["validate", str(path)], ["gate", str(tmp_path), "--params", str(path)]):
        out = bench(tmp_path, *args)
        assert out.returncode == 2 and f"{path}: gates.maxdrop: unknown key 'maxdrop'" in out.stderr, out.stderr


def test_a_valid_section_loads_and_its_baseline_is_relative_to_the_params_file(tmp_path):
    (tmp_path / "params").mkdir()
    path = grid(tmp_path / "params" / "g.yaml", "http://127.0.0.1:9/v1", gates={"min": 3.5, "max_drop": 0.25, "baseline": "../runs/main",
                                                "map": {"m1/p@v1": "m1/p@v2"}})
    gates = load_sweep(path)[0].gates
    assert gates == Gates(min=3.5, max_drop=0.25, baseline="../runs/main", map={"m1/p@v1": "m1/p@v2"})
    assert gates.baseline_dir(path) == tmp_path / "params" / ".." / "runs" / "main" and not gates.strict
    assert yaml.safe_load(path.read_text())["gates"]["baseline"] == "../runs/main"


def test_command_line_options_override_the_files_keys_and_say_what_is_missing():
    base = Gates(min=3.0, max_drop=0.5, baseline="runs/main")
    assert merge(base, max_drop=0.1, strict=True) == Gates(min=3.0, max_drop=0.1, baseline="runs/main", strict=True)
    assert merge(None, min=2.0) == Gates(min=2.0)
    with pytest.raises(ValueError, match="max_drop compare with a baseline run"):
        merge(None, max_drop=0.2)
    with pytest.raises(ValueError, match="--max-drop: Input should be greater than or equal to 0"):
        merge(base, max_drop=-1.0)
    with pytest.raises(ValueError, match="declares no gate"):
        merge(None, strict=True)
