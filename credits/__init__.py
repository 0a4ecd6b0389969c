"""Credits and usage (SPEC §9): prices, balances, quotas, charging, the ledger, usage records and
their roll-ups, and the consolidation records of conversation turns. `retention` keeps
lifecycle, erasure and receipts."""
