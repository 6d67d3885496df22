"""The PJRT_Api table generated for jaxlib 0.4.13 from TF 2.13's header (build_tools/gen_pjrt_api.py)."""

from __future__ import annotations

import pytest

from build_tools import gen_pjrt_api
from build_tools.fetch import extract_header_tree
from build_tools.pins import Series


@pytest.fixture(scope="module")
def tf_fields(series: Series) -> list:
    header = extract_header_tree(series.pjrt_header) / series.pjrt_header.extra["header"]
    return gen_pjrt_api.read_tf_fields(header.read_text())


def test_tf_2_13_table_is_the_552_byte_one(tf_fields: list) -> None:
    assert 16 + 8 * len(tf_fields) == 552
    assert "PJRT_LoadedExecutable_GetCostAnalysis" in tf_fields


def test_generated_table_matches_jaxlib_0_4_13_offsets(tf_fields: list) -> None:
    fields = gen_pjrt_api.table_0_4_13(tf_fields)
    gen_pjrt_api.check(fields)  # 592 bytes and the four offsets jaxlib calls
    assert len(fields) == 69
    assert "PJRT_LoadedExecutable_GetCostAnalysis" not in fields
    assert fields[-1] == "PJRT_Compile"


def test_a_misplaced_slot_is_caught(tf_fields: list) -> None:
    fields = gen_pjrt_api.table_0_4_13(tf_fields)
    i = fields.index("PJRT_Device_MemoryStats")
    fields[i], fields[i + 1] = fields[i + 1], fields[i]
    with pytest.raises(SystemExit, match="PJRT_Device_MemoryStats lands at"):
        gen_pjrt_api.check(fields)


def test_rendered_header_declares_the_table(tf_fields: list, tmp_path) -> None:
    text = gen_pjrt_api.render(gen_pjrt_api.table_0_4_13(tf_fields), "pjrt_c_api.h")
    assert "static_assert(sizeof(PJRT_Api_0_4_13) == 592" in text
    assert "PJRT_Executable_GetCostAnalysis_Args" in text


def test_current_table_is_the_headers_own_and_checks_its_version() -> None:
    # The 0.90 table is the pinned header's PJRT_Api as it is; the generator refuses a header of another version,
    # so the plugin can never report a version its table does not fill.
    text = gen_pjrt_api.render_current("0.90", "#define PJRT_API_MINOR 90\n", "pjrt_c_api.h")
    assert "#define JAX_IPU_PJRT_MINOR 90" in text and "sizeof(PJRT_Api) == 1064" in text
    with pytest.raises(SystemExit, match=r"is PJRT API 0\.91, the 0\.90 table needs 0\.90"):
        gen_pjrt_api.render_current("0.90", "#define PJRT_API_MINOR 91\n", "pjrt_c_api.h")
