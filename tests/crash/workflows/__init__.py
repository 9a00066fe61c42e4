"""The crash suite's workflow (one manifest per journal kind), its ledger-writing effects, and the harness the
end-to-end crash tests share (harness.py)."""
