"""The leaf helpers every app uses: errors, instants, ids and limits, signed cursors, JSON text,
environment settings, log lines, progress bars, queueing by name, the chunked loop. Core imports
no app (import-linter's "core-imports-no-app" contract), so any app may import it."""
