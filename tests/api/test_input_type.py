"""A workflow's ``inputType`` is checked at every start the Python API makes — ``start``/``run`` (the dispatch
chokepoint) and ``schedule`` (which admits without dispatching) — before anything is admitted (issue 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

import telo
from telo.errors import Code, TeloError

MANIFEST = """\
kind: Telo.Application
metadata: { name: Typed, version: 1.0.0 }
imports: { Local: durable-local, Journal: durable-journal-sqlite }
---
kind: Journal.Journal
metadata: { name: runs }
path: ./runs.db
---
kind: Local.Workflow
metadata: { name: order }
journal: !ref runs
runId: !cel "'order:' + inputs.id"
inputType:
  kind: Telo.JsonSchema
  schema:
    type: object
    required: [id, qty]
    properties: { id: { type: string }, qty: { type: integer, minimum: 1 }, rush: { type: boolean, default: false } }
inputs: !cel "inputs"
steps:
  - { name: total, value: !cel "inputs.qty * 2" }
"""


def test_start_and_schedule_refuse_inputs_the_input_type_refuses(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    with telo.load(MANIFEST, journal=journal) as app:
        for bad in ({"id": "a", "qty": "3"}, {"id": "a", "qty": 0}, {"qty": 3}):
            with pytest.raises(TeloError) as err:
                app.start("order", bad)
            assert err.value.code == Code.INPUT_INVALID, err.value
            with pytest.raises(TeloError) as err:
                app.schedule("order", bad, after=3600)
            assert err.value.code == Code.INPUT_INVALID
            assert "order inputs: the declared schema refuses it" in err.value.message
        assert app.runs().runs == ()
        done = app.run("order", {"id": "b", "qty": 3})
        assert done.status == "completed" and done.value["steps"]["total"]["result"] == 6
        scheduled = app.schedule("order", {"id": "c", "qty": 1}, after=3600)
        assert scheduled.scheduled and scheduled.run_id == "order:c"


def test_a_schema_reference_outside_the_schema_is_refused_never_fetched(tmp_path: Path) -> None:
    """jsonschema's default registry opened any URL a ``$ref`` named, at every dispatch (issue 19): a local
    HTTP server proves nothing is fetched now, and the start is refused naming the reference."""
    import http.server
    import threading

    requests: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            body = b'{"type": "object"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/order.json"
    try:
        manifest = MANIFEST.replace("    type: object\n    required: [id, qty]\n",
                                    f"    type: object\n    $ref: \"{url}\"\n    required: [id, qty]\n")
        with telo.load(manifest, journal=str(tmp_path / "j.db")) as app:
            with pytest.raises(TeloError) as err:
                app.start("order", {"id": "a", "qty": 1})
            assert err.value.code == Code.INPUT_INVALID and url in err.value.message
            assert app.runs().runs == ()
    finally:
        server.shutdown()
    assert requests == []
