"""docs/record.schema.json is generated from the models the code uses, and must not go stale.

Regenerate with ``python -m tests.core.test_schema`` from the repository root.
"""

from __future__ import annotations

import json

from pbot_watch.history.record import HistoryRecord, record_json_schema
from tests.support.paths import FIXTURES, REPO
from tests.support.pi_sessions import record_of

SCHEMA = REPO / "docs" / "record.schema.json"


def rendered() -> str:
    return json.dumps(record_json_schema(), indent=2, ensure_ascii=False) + "\n"


class TestRecordSchema:
    def test_published_schema_is_current(self) -> None:
        """The committed schema equals the one generated from HistoryRecord (run this module to refresh)."""
        assert SCHEMA.read_text(encoding="utf-8") == rendered()

    def test_schema_describes_the_contract(self) -> None:
        """Node ``from`` is published under its JSON name, and unknown fields are allowed on records and nodes."""
        schema = record_json_schema()
        node = schema["$defs"]["HistoryNode"]
        assert "from" in node["properties"] and "from_" not in node["properties"]
        assert node.get("additionalProperties", True) is True
        assert schema.get("additionalProperties", True) is True
        assert {"id", "sessionId", "name", "nodes"} == set(schema["required"])

    def test_real_records_validate(self) -> None:
        """Records built from the real fixtures validate against the model behind the schema."""
        for path in sorted((FIXTURES / "real-v3").glob("*.jsonl")):
            HistoryRecord.model_validate(record_of(path.read_bytes()))


def main() -> None:
    SCHEMA.parent.mkdir(parents=True, exist_ok=True)
    SCHEMA.write_text(rendered(), encoding="utf-8")
    print(f"wrote {SCHEMA.relative_to(REPO)}")


if __name__ == "__main__":
    main()
