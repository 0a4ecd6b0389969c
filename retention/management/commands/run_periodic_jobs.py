"""Run the beat jobs once, now (SPEC §5.1): `manage.py run_periodic_jobs [--only NAME]`.

On a terminal a progress bar counts the jobs (each job is chunked inside, and reports when it
is done); with `--json` or a stdout that is not a terminal there is no bar, only the results."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from core import progress
from retention.jobs import JOBS


class Command(BaseCommand):
    help = "Run the periodic (beat) jobs once, now, and print what each did."

    def add_arguments(self, parser):
        parser.add_argument(
            "--only",
            action="append",
            metavar="NAME",
            help=f"Run only this job (repeatable). One of: {', '.join(JOBS)}.",
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON object {job: summary}.")

    def handle(self, *args, only: list[str] | None = None, json: bool = False, **options):
        names = only or list(JOBS)
        unknown = [n for n in names if n not in JOBS]
        if unknown:
            raise CommandError(f"Unknown job {', '.join(unknown)}; known jobs: {', '.join(JOBS)}.")
        results = {}
        watched = progress.interactive(self.stdout, json=json)
        with (
            progress.bar(total=len(names), desc="periodic jobs", unit="job", enabled=watched) as bar,
            progress.logs_above_the_bar(watched),
        ):
            for name in names:
                bar.set_postfix_str(name)
                results[name] = JOBS[name]()
                if not json:
                    with bar.external_write_mode():  # the bar steps aside for the line, then redraws below it
                        self.stdout.write(f"{name}: {_dumps(results[name])}")
                bar.update(1)
        if json:
            self.stdout.write(_dumps(results))


def _dumps(value) -> str:
    return json.dumps(value, default=str, sort_keys=True)
