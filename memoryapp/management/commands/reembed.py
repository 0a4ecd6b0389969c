"""Re-embed stored memory versions with the configured embedder (MEMORY_EMBEDDER).

Batched and resumable: it only touches versions whose stored vector was made by another
embedder, whose BM25 terms were made by another term format (recall.tokenize.TERMS_FORMAT), or
that have no index entry, so an interrupted run continues where it stopped. Until it has run,
recall leaves a vector of another embedder out of the cosine ranking (BM25 and entities still
find the memory), so changing MEMORY_EMBEDDER never compares vectors of two models. A progress bar
shows on a terminal; `--json` (or a stdout that is not a terminal) keeps the output to results."""

import json

from django.conf import settings
from django.core.management.base import BaseCommand

from core import progress
from memoryapp.recall import index
from memoryapp.recall.embedders import get_embedder


class Command(BaseCommand):
    help = "Re-embed memories whose vectors were made by another embedder (or whose terms by another format)."

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=64)
        parser.add_argument("--embedder", default=None, help="defaults to MEMORY_EMBEDDER")
        parser.add_argument(
            "--json",
            action="store_true",
            help='Print one JSON object {"reembedded": n, "embedder": id}, and no progress bar.',
        )

    def handle(self, *args, **opts):
        embedder = get_embedder(opts["embedder"] or settings.MEMORY_EMBEDDER)
        stale = index.stale_versions(embedder)
        total = stale.count()
        done, last_pk = 0, 0
        bar = progress.bar(
            total=total, desc="reembed", unit="version", enabled=progress.interactive(self.stdout, json=opts["json"])
        )
        while True:
            batch = list(stale.filter(pk__gt=last_pk).order_by("pk").only("pk", "text")[: opts["batch_size"]])
            if not batch:
                break
            index.replace_entries(index.index_entries(batch, embedder))
            done += len(batch)
            last_pk = batch[-1].pk
            bar.update(len(batch))
        bar.close()
        if opts["json"]:
            self.stdout.write(json.dumps({"reembedded": done, "embedder": embedder.id}))
        else:
            self.stdout.write(f"Re-embedded {done} memory versions with {embedder.id}.")
