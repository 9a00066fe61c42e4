#!/usr/bin/env bash
# The main job: the durable order workflow of examples/orders on the embedded SQLite journal.
# It starts an order, kills the process with SIGKILL in the middle, runs it again (finished steps are
# replayed from the journal, not repeated), delivers the approval it waits for from the CLI, and lets it
# finish after a durable sleep. The ledger at the end shows every effect and how often it happened.
source "$(dirname "$0")/_venv.sh"
cd examples/orders
rm -rf .telo
journal=.telo/orders.db

echo "== 1. start order A-1 (it will be killed with SIGKILL while packing)"
ORDERS_PACK_SECONDS=5 telo run orders.yaml --input order=A-1 &
pid=$!
for _ in $(seq 1 300); do grep -q "packing A-1" .telo/ledger.txt 2>/dev/null && break; sleep 0.1; done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
echo "   killed -9 pid $pid"
telo status order:A-1 --journal "$journal"

echo; echo "== 2. run it again: reserve and charge replay from the journal; packing restarts; it parks for approval"
ORDERS_PACK_SECONDS=0.2 telo run orders.yaml --input order=A-1 || [ $? = 4 ]  # 4: parked, not settled yet
telo status order:A-1 --journal "$journal"

echo; echo "== 3. deliver the approval from the CLI"
telo deliver approve:A-1 --journal "$journal" --payload '{"approvedBy": "ada"}'

echo; echo "== 4. run again: it continues after the approval, sleeps 2 s durably, ships and emails"
telo run orders.yaml --input order=A-1
telo result order:A-1 --journal "$journal" | grep -E "status|replayedSteps"

echo; echo "== the ledger"
cat .telo/ledger.txt
charged=$(grep -c "charged" .telo/ledger.txt)
echo; echo "charged $charged time(s) (must be 1): finished steps never repeat; only the interrupted 'pack' ran twice"
[ "$charged" = 1 ]
