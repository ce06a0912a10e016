"""`gsd reproduce` reuses a campaign folder only when the same code and config made it."""

import json

import pytest

from gsd.reproduce import provenance


def test_code_fingerprint_is_stable_and_config_sensitive():
    code = provenance.code_fingerprint()
    assert len(code) == 64 and code == provenance.code_fingerprint()
    a = provenance.fingerprint({"steps": 40, "lr": 0.5}, code)
    assert a == provenance.fingerprint({"lr": 0.5, "steps": 40}, code)  # key order is not a difference
    assert a != provenance.fingerprint({"steps": 41, "lr": 0.5}, code)
    assert a != provenance.fingerprint({"steps": 40, "lr": 0.5}, code[::-1])


def test_prepare_folder_reuses_same_clears_other_and_keeps_foreign(tmp_path):
    folder = tmp_path / "campaign"
    first = provenance.prepare_folder(folder, {"steps": 40}, marker="campaign.json")
    assert first["earlier"] == "none"
    folder.mkdir()
    (folder / "campaign.json").write_text("{}")
    record = json.loads((tmp_path / provenance.FINGERPRINTS).read_text())
    assert record == {"campaign": first["fingerprint"]}
    assert provenance.prepare_folder(folder, {"steps": 40}, marker="campaign.json")["earlier"] == "same"
    assert (folder / "campaign.json").is_file()
    other = provenance.prepare_folder(folder, {"steps": 41}, marker="campaign.json")
    assert other["earlier"] == "other" and not folder.exists()  # cleared, to be computed again
    # A folder without a fingerprint on record (an older gsd wrote it) is not trusted either.
    folder.mkdir()
    (folder / "campaign.json").write_text("{}")
    (tmp_path / provenance.FINGERPRINTS).unlink()
    assert provenance.prepare_folder(folder, {"steps": 41}, marker="campaign.json")["earlier"] == "other"
    # Files gsd reproduce did not write are never removed.
    mine = tmp_path / "allocation"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="did not write"):
        provenance.prepare_folder(mine, {}, marker="runs")
    assert (mine / "notes.txt").read_text() == "mine"
