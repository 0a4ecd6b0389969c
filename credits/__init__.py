"""Credits and usage (SPEC §9): prices, balances, quotas, charging, the ledger, usage records and
their roll-ups, and the consolidation records of conversation turns. Moved out of `retention`
(issue 23 step 4), which keeps lifecycle, erasure and receipts."""
