#!/usr/bin/env bash
# The main job. Until the durable engine lands this demonstrates the typed-frame codec every journal entry
# is written with: typed values in, canonical frame text out, and back.
source "$(dirname "$0")/_venv.sh"
echo "== a plain JSON value, integers read as CEL int, as its canonical typed frame (spec §6)"
telo frame encode '{"order":"A-4","qty":3,"price":19.5,"tags":["new"],"when":null}'
echo "== a frame carrying uint, bytes, timestamp, duration and an int-keyed map, decoded strictly"
frame='{"at":{"$telo":"google.protobuf.Timestamp","value":"2026-01-15T09:30:00.25Z"},"b":{"$telo":"bytes","value":"-_8A"},"d":{"$telo":"google.protobuf.Duration","value":"-1.5s"},"m":{"$telo":"map","value":[[{"$telo":"int","value":"2"},"two"]]},"u":{"$telo":"uint","value":"18446744073709551615"}}'
telo frame decode "$frame"
echo "== a non-canonical frame is refused with its JSON Pointer"
telo frame decode '{"$telo":"google.protobuf.Duration","value":"1.500s"}' || true
