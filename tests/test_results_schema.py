import json

import jsonschema
import pytest

from graders.scoring.results import SCHEMA_FILE, schema_text


def test_exported_schema_is_current():
    assert SCHEMA_FILE.read_text() == schema_text(), "run `python -m graders.scoring.results` to re-export"


def test_schema_rejects_a_report_without_score():
    schema = json.loads(SCHEMA_FILE.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"assignment": "a3"}, schema)
