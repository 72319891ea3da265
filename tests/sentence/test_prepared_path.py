"""Which prepared dataset a sentence run trains on is worked out in one place, and a report never
prepares one."""

from __future__ import annotations

import pytest

from cn3.config import ConfigError
from cn3.sentence.prepared import prepared_path
from cn3.sentence.resolve import resolve_config


def test_a_given_dataset_is_used_and_a_report_never_prepares(tmp_path, monkeypatch):
    given = tmp_path / "given"
    given.mkdir()
    (given / "manifest.json").write_text("{}")
    assert prepared_path(resolve_config("trec", None, {"data.prepared": given}, [])) == given
    monkeypatch.setenv("CN3_PREPARED", str(tmp_path / "prepared"))  # the default directory: empty
    cfg = resolve_config("trec", None, {}, [])
    with pytest.raises(ConfigError, match=r"holds no prepared dataset: a report .* never prepares it; run "
                                          r"`cn3 prepare --task trec`"):
        prepared_path(cfg, prepare=False)
    assert not (tmp_path / "prepared").exists()  # nothing was written
