"""Mutation testing of the rule modules, one module at a time (issue 15 §1). Run via bench/mutation.sh.

For each module: a fresh mutants/ copy, mutmut restricted to that module's files, pytest
restricted to the test files that exercise it (mutmut then runs, per mutant, only the tests
that reached the mutated function). Prints every surviving mutant's diff and a score table.
Survivors judged equivalent (no test could tell them apart from the original) are listed in
bench/mutation_equivalent.txt with the reason, and counted apart.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "var" / "mutation"
EQUIVALENT_FILE = ROOT / "bench" / "mutation_equivalent.txt"

# The files that hold the SPEC rules' own tests and the kill tests (issue 23 step 7 folded
# tests/test_spec_rules.py and tests/test_mutation_kills.py into the file of the rule each states):
# every module's selection keeps them, as it kept the two files they came from.
RULE_TESTS = [
    "tests/gates/test_rows.py",
    "tests/gates/test_precedence.py",
    "tests/context_sets/test_scope.py",
    "tests/limits/test_rate_window.py",
    "tests/limits/test_member_bound.py",
    "tests/limits/test_cap.py",
    "tests/memories/test_recheck.py",
    "tests/memories/test_as_of.py",
    "tests/memories/test_list.py",
    "tests/lifecycle/test_expires_at.py",
    "tests/erasure/test_erase.py",
    "tests/masking/test_placeholders.py",
    "tests/masking/test_normalisation.py",
    "tests/masking/test_end_to_end.py",
    "tests/recall/test_math.py",
    "tests/recall/test_rankings.py",
    "tests/recall/test_budget.py",
    "tests/recall/test_models.py",
    "tests/governance/test_workspace_api.py",
    "tests/governance/test_knowledge.py",
    "tests/governance/test_bootstrap_commands.py",
]
# what tests/test_memories.py held, now in the files of its rules
MEMORIES = [
    "tests/memories/test_keys_and_forget.py",
    "tests/memories/test_as_of.py",
    "tests/memories/test_recheck.py",
    "tests/memories/test_list.py",
    "tests/isolation/test_between_members.py",
    "tests/context_sets/test_bound_credentials.py",
    "tests/gates/test_rows.py",
    "tests/recall/test_rankings.py",
]
# the kill tests by node id (MUTATION_BASELINE=1 leaves them out, MUTATION_KILLS_ONLY=1 runs only them)
KILL_TESTS_FILE = ROOT / "bench" / "mutation_kill_tests.txt"


def _unique(*groups: list[str]) -> list[str]:
    return list(dict.fromkeys(t for group in groups for t in group))


# module key -> (files to mutate, test files that exercise them)
MODULES: dict[str, tuple[list[str], list[str]]] = {
    # the name check's identifier cut-out and the workspace's phone region reach the gate (issues 33-34)
    "gates": (
        ["memoryapp/gates.py"],
        _unique(
            ["tests/gates/test_rows.py"],
            RULE_TESTS,
            [
                "tests/context_sets/test_bound_credentials.py",
                "tests/memories/test_identifier_keys.py",
                "tests/governance/test_phone_region.py",
            ],
        ),
    ),
    # identifiers.py: the UUID/ULID cut-out the name check (name_kinds) reads names with (issue 34)
    "masking": (
        [
            "memoryapp/masking/__init__.py",
            "memoryapp/masking/common.py",
            "memoryapp/masking/text.py",
            "memoryapp/masking/identifiers.py",
        ],
        _unique(
            ["tests/masking/test_detectors.py", "tests/masking/test_attacks.py"],
            RULE_TESTS,
            [
                "tests/masking/test_identifiers.py",
                "tests/masking/test_attack_34_identifier_email.py",
                "tests/masking/test_attack_identifier_disguise.py",
                "tests/masking/test_region.py",
                "tests/masking/test_whitespace_separators.py",
                "tests/masking/test_lookalike_after_line_break.py",
                # _inside: a detector's span inside a protected number (the first one, or ending with it)
                "tests/masking/test_catalogue.py::test_everyday_numbers_are_left_alone",
            ],
        ),
    ),
    "masking_detectors": (
        [
            "memoryapp/masking/email.py",
            "memoryapp/masking/phone.py",
            "memoryapp/masking/numbers.py",
            "memoryapp/masking/secrets.py",
            "memoryapp/masking/secret_labels.py",
            "memoryapp/masking/secret_shapes.py",
            "memoryapp/masking/words.py",
            "memoryapp/masking/catalogue.py",
            "memoryapp/masking/mobiles.py",
        ],
        _unique(
            ["tests/masking/test_detectors.py", "tests/masking/test_attacks.py", "tests/masking/test_forms.py"],
            RULE_TESTS,
            [
                "tests/masking/test_catalogue.py",
                "tests/masking/test_region.py",
                "tests/masking/test_separator_class.py",
                "tests/masking/test_email_followed_by.py",
            ],
        ),
    ),
    # models.py holds restrict() since issue 35 (the access entries' too): their tests come along
    "visibility": (
        ["memoryapp/visibility.py", "memoryapp/models.py"],
        _unique(
            RULE_TESTS,
            [
                "tests/isolation/test_matrix.py",
                "tests/layers/test_model_rules.py",
                "tests/layers/test_restrict.py",
                "tests/access_log/test_entries.py",
            ],
            MEMORIES,
        ),
    ),
    "actions": (["memoryapp/actions.py"], _unique(MEMORIES, RULE_TESTS)),
    # an erase destroys the memories' keys and its receipt states the key store's residue (issues 24, 33)
    "erasure": (
        ["retention/erasure.py"],
        _unique(
            ["tests/erasure/test_verify_forgetting.py", "tests/lifecycle/test_expiry_and_grace.py"],
            RULE_TESTS,
            ["tests/erasure/test_encryption.py", "tests/erasure/test_key_residue.py"],
            # the sweep's bounded WAL truncation (truncate_wals) and the erase's flush under a held reader
            ["tests/erasure/test_held_reader.py"],
            # the receipt's KEK window (_kek_residual, residual_until_of): what rotation promises
            ["tests/erasure/test_residual_promise.py", "tests/erasure/test_kek_rotation.py"],
            # the chunk claim (FOR UPDATE SKIP LOCKED OF self): PostgreSQL runs only
            ["tests/lifecycle/test_concurrent_sweeps.py"],
            # the file KEK only: the SoftHSM2 token the [pkcs11] runs start is not the mutants' copy's
            ["-knot pkcs11"],
        ),
    ),
    "ratelimit": (
        ["memoryapp/ratelimit.py"],
        _unique(RULE_TESTS, ["tests/limits/test_credential_cycling.py", "tests/limits/test_read_limit.py"]),
    ),
    "recall": (
        ["memoryapp/recall/bm25.py", "memoryapp/recall/fusion.py"],
        _unique(["tests/recall/test_math.py"], RULE_TESTS),
    ),
    "recall_service": (
        ["memoryapp/recall/service.py"],
        _unique(
            ["tests/recall/test_rankings.py", "tests/memories/test_as_of.py"],
            RULE_TESTS,
            ["tests/recall/test_read_path.py"],
        ),
    ),
    "previews": (["retention/previews.py"], _unique(["tests/previews/test_manifest.py"], RULE_TESTS)),
    # receipts.py was split (issue 23): the keys (_decode_key…) went to receipt_keys.py, the chain
    # checks to receipt_checks.py; the verification records and anchors have their own test files
    "receipts": (
        ["retention/receipts.py", "retention/receipt_checks.py", "retention/receipt_keys.py"],
        [
            "tests/receipts/test_chain.py",
            "tests/receipts/test_complete.py",
            "tests/receipts/test_verifications.py",
            "tests/receipts/test_verify_appends.py",
            "tests/receipts/test_verification_truncation.py",
            "tests/receipts/test_head_deleted.py",
            # the keyed digests of a receipt's names (redact, redaction_digest) and their migration
            "tests/receipts/test_names.py",
            "tests/receipts/test_name_migration.py",
            # the periodic check of every chain (check_all_chains, _stored_hash)
            "tests/receipts/test_verify_cost.py",
            # the keys as configured (_decode_key, public_keys_json)
            "tests/receipts/test_key_configuration.py",
        ],
    ),
    # the counts (artifact_counts, counts_for) and the access-log sweep moved here in issue 23: their tests come along
    "lifecycle": (
        ["retention/lifecycle.py"],
        _unique(
            [
                "tests/lifecycle/test_expiry_and_grace.py",
                "tests/lifecycle/test_cascades.py",
                "tests/lifecycle/test_matrix.py",
                "tests/lifecycle/test_worker.py",
            ],
            [
                "tests/layers/test_actions_hold_rules.py",
                "tests/access_log/test_entries.py",
                "tests/previews/test_manifest.py",
                "tests/receipts/test_complete.py",
            ],
            RULE_TESTS,
        ),
    ),
    # the old retention/credits.py, split (issue 23 step 5); usage.py holds what its usage JSON and lines did
    "credits": (
        ["credits/pricing.py", "credits/quotas.py", "credits/charging.py", "credits/jobs.py", "credits/usage.py"],
        _unique(
            [
                "tests/credits/test_charging.py",
                "tests/credits/test_usage.py",
                "tests/credits/test_beat_jobs.py",
                "tests/consolidation/test_turns.py",
            ],
            RULE_TESTS,
        ),
    ),
}

DETECTED = {"killed", "timeout", "segfault", "caught by type check"}
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')


def is_wording(diff: str) -> bool:
    """A mutant that only rewords a human-readable message (a string literal with a space in it,
    wrapped in XX or case-changed). SPEC §3 fixes an error's code and details; its message is
    for people (and translated), so no test should pin its letters. Such survivors are counted
    as equivalent by this rule; a mutant that drops or nulls a message is not covered by it."""
    removed = [line[1:] for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    if len(removed) != 1 or len(added) != 1:
        return False
    old = [a or b for a, b in _LITERAL.findall(removed[0])]
    new = [a or b for a, b in _LITERAL.findall(added[0])]
    if len(old) != len(new) or _LITERAL.sub('""', removed[0]) != _LITERAL.sub('""', added[0]):
        return False
    changed = [(o, n) for o, n in zip(old, new) if o != n]
    return (
        len(changed) == 1
        and " " in changed[0][0]
        and changed[0][1] in (f"XX{changed[0][0]}XX", changed[0][0].lower(), changed[0][0].upper())
    )


def load_equivalents() -> dict[str, str]:
    """`mutant_name  reason` per line; '#' starts a comment."""
    result = {}
    if EQUIVALENT_FILE.exists():
        for line in EQUIVALENT_FILE.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, reason = line.partition(" ")
                result[name] = reason.strip()
    return result


def kill_tests() -> list[str]:
    """Node ids of the tests written to kill survivors, one a line ('#' starts a comment)."""
    lines = KILL_TESTS_FILE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def configure(key: str) -> None:
    import mutmut.configuration as mc

    files, tests = MODULES[key]
    cfg = mc._load_config()
    cfg.only_mutate = files
    # some tests import their generators from bench/ (bench/identifier_keys.py): the copy needs it
    cfg.also_copy = [*cfg.also_copy, Path("bench")]
    # a selection is test files or node ids, plus options (`--deselect=<node>`, `-k<expression>`)
    cfg.pytest_add_cli_args_test_selection = [
        t for t in tests if t.startswith("-") or (ROOT / t.split("::")[0]).exists()
    ]
    # MUTATION_BASELINE=1: the suite without the kill tests (the "before" score).
    if os.environ.get("MUTATION_BASELINE") == "1":
        cfg.pytest_add_cli_args_test_selection += [arg for node in kill_tests() for arg in ("--deselect", node)]
    # MUTATION_KILLS_ONLY=1 (with --survivors): judge the baseline's undetected mutants by the kill
    # tests alone — fast; a mutant they miss counts as surviving even if the slower suite, not
    # reached in the baseline's time, would have killed it (so the score errs low).
    if os.environ.get("MUTATION_KILLS_ONLY") == "1":
        cfg.pytest_add_cli_args_test_selection = kill_tests()
    mc._config = cfg


def previous(key: str) -> dict:
    path = OUT / f"{key}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def run_one(key: str, jobs: int, survivors_only: bool) -> None:
    """Child process: configure mutmut for one module and run it (results land in mutants/).
    With survivors_only, only the mutants the last run did not detect are run again."""
    configure(key)
    from mutmut.__main__ import _run

    names: tuple[str, ...] = ()
    if survivors_only:
        equivalents = load_equivalents()
        names = tuple(
            n
            for n, e in previous(key).items()
            if e["status"] not in DETECTED
            and n not in equivalents
            and not (e["status"] == "survived" and is_wording(e.get("diff", "")))
        )
        # MUTATION_ONLY="<glob> …": only the undetected mutants whose names match one of the globs
        # (re-judging a few survivors after a kill test, without waiting for the unchecked rest)
        if only := os.environ.get("MUTATION_ONLY", "").split():
            names = tuple(n for n in names if any(fnmatch(n, pattern) for pattern in only))
        print(f"re-running {len(names)} undetected mutants of {key}", flush=True)
        if not names:
            return
    try:
        _run(names, jobs)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise


def collect(key: str, merge: bool) -> None:
    """Child process: read mutants/*.meta (also after a timed-out run) into var/mutation/<key>.json.
    With merge (a survivors-only re-run), a mutant not re-run keeps its earlier verdict: tests
    were only added since, so a killed mutant stays killed."""
    before = previous(key) if merge else {}
    configure(key)
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    mutants = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, code in data.exit_code_by_key.items():
            status = status_by_exit_code[code]
            entry = {"status": status, "path": str(path)}
            if status not in DETECTED and status != "not checked":
                entry["diff"] = get_diff_for_mutant(name, path=path)
            if status == "not checked" and name in before:
                entry = before[name]
            mutants[name] = entry
    if not mutants:
        print(f"no mutants of {key} found in mutants/: the run failed, earlier results kept", flush=True)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{key}.json").write_text(json.dumps(mutants, indent=1), encoding="utf-8")


#: When two runs disagree: the verdict that says more about the tests wins.
_RANK = {"not checked": 0, "no tests": 1, "suspicious": 2, "survived": 3}


def combine(key: str, other: Path) -> None:
    """Merge `other` (e.g. a PostgreSQL run's var/mutation/<key>.json, MUTATION_DATABASE_URL) into
    this checkout's results for `key`: detected on either backend is detected (the PostgreSQL-only
    branches are unreachable on SQLite and the reverse); otherwise a survivor stays a survivor."""
    mine, theirs = previous(key), json.loads(other.read_text(encoding="utf-8"))
    for name, entry in theirs.items():
        current = mine.get(name)
        if current is None or current["status"] in DETECTED:
            mine.setdefault(name, entry)
        elif entry["status"] in DETECTED or _RANK.get(entry["status"], 2) > _RANK.get(current["status"], 2):
            mine[name] = entry
    (OUT / f"{key}.json").write_text(json.dumps(mine, indent=1), encoding="utf-8")


def fresh_mutants_dir() -> None:
    """mutmut treats a file already in mutants/ as mutated: a leftover copy from another module's
    run would silently give zero mutants, so the directory must really be gone."""
    for _ in range(10):
        shutil.rmtree(ROOT / "mutants", ignore_errors=True)
        if not (ROOT / "mutants").exists():
            return
        time.sleep(1)
    raise SystemExit("could not remove mutants/ (is another mutation run still going?)")


def changed_modules() -> list[str]:
    # Against the merge base: what this branch (and the working tree) changed, not what main gained since.
    base = subprocess.run(
        ["git", "merge-base", "main", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    names = subprocess.run(
        ["git", "diff", "--name-only", base, "--"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [key for key, (files, _) in MODULES.items() if any(fnmatch(n, f) for n in names for f in files)]


def score_of(mutants: dict, equivalents: dict[str, str]) -> float | None:
    detected = sum(e["status"] in DETECTED for e in mutants.values())
    excluded = sum(
        e["status"] == "not checked"
        or (
            e["status"] not in DETECTED
            and (n in equivalents or (e["status"] == "survived" and is_wording(e.get("diff", ""))))
        )
        for n, e in mutants.items()
    )
    return 100.0 * detected / (len(mutants) - excluded) if len(mutants) > excluded else None


def tally(mutants: dict, equivalents: dict[str, str]) -> Counter:
    counts: Counter = Counter(total=len(mutants))
    for name, entry in mutants.items():
        status = entry["status"]
        if status in DETECTED:
            counts["detected"] += 1
        elif status == "not checked":
            counts["unchecked"] += 1
        elif name in equivalents or (status == "survived" and is_wording(entry.get("diff", ""))):
            counts["equivalent"] += 1
        elif status == "no tests":
            counts["no tests"] += 1
        else:
            counts["survived"] += 1
    return counts


def markdown(keys: list[str]) -> None:
    """The docs/mutation.md table: baseline (without the kill tests) -> with them."""
    equivalents = load_equivalents()
    print(
        "| module | files | mutants | baseline: detected / survived / no tests / unchecked → score | with the kill "
        "tests: detected / survived / no tests / unchecked → score | equivalent |"
    )
    print("|---|---|---|---|---|---|")
    for key in keys:
        after_path, base_path = OUT / f"{key}.json", OUT / f"{key}.baseline.json"
        if not after_path.exists():
            print(f"| {key} | {', '.join(MODULES[key][0])} | – | not run | not run | – |")
            continue

        def cell(path):
            if not path.exists():
                return "–"
            c = tally(json.loads(path.read_text(encoding="utf-8")), equivalents)
            score = score_of(json.loads(path.read_text(encoding="utf-8")), equivalents)
            return (
                f"{c['detected']} / {c['survived']} / {c['no tests']} / {c['unchecked']} → **{score:.1f}%**"
                if score is not None
                else "–"
            )

        after = tally(json.loads(after_path.read_text(encoding="utf-8")), equivalents)
        changed = not base_path.exists() or after_path.read_bytes() != base_path.read_bytes()
        after_cell = cell(after_path) if changed else "no kill tests yet"
        print(
            f"| {key} | {', '.join(f.split('/')[-1] for f in MODULES[key][0])} | {after['total']} | {cell(base_path)} "
            f"| {after_cell} | {after['equivalent']} |"
        )


def report(keys: list[str]) -> int:
    equivalents = load_equivalents()
    rows, stale = [], set(equivalents)
    for key in keys:
        path = OUT / f"{key}.json"
        if not path.exists():
            rows.append((key, None))
            continue
        mutants = json.loads(path.read_text(encoding="utf-8"))
        counts = Counter()
        untested: Counter[str] = Counter()
        print(f"\n=== {key}: surviving mutants ===")
        for name, entry in sorted(mutants.items()):
            status = entry["status"]
            if status in DETECTED:
                counts["killed" if status != "timeout" else "timeout"] += 1
                continue
            if name in equivalents:
                stale.discard(name)
                counts["equivalent"] += 1
                continue
            if status == "not checked":
                counts["not checked"] += 1
                continue
            if status == "no tests":
                counts["no tests"] += 1
                untested[name.split("__mutmut_")[0]] += 1
                continue
            if status == "survived" and is_wording(entry.get("diff", "")):
                counts["equivalent"] += 1
                counts["wording"] += 1
                continue
            counts["survived"] += 1
            print(f"--- {name} ({status})\n{entry.get('diff', '')}")
        for function, n in sorted(untested.items()):
            print(f"--- no selected test reaches {function}: {n} mutants")
        counts["total"] = len(mutants)
        baseline = OUT / f"{key}.baseline.json"
        if baseline.exists():
            counts["before"] = score_of(json.loads(baseline.read_text(encoding="utf-8")), equivalents)
        rows.append((key, counts))
    print(
        "\nmodule       killed  timeout  survived  no-tests  equivalent  unchecked  total  score  (baseline: "
        "without the kill tests)"
    )
    for key, c in rows:
        if c is None:
            print(f"{key:<12} (no result: the run failed, see its log)")
            continue
        denominator = c["total"] - c["equivalent"] - c["not checked"]
        score = 100.0 * (c["killed"] + c["timeout"]) / denominator if denominator else 100.0
        print(
            f"{key:<12} {c['killed']:>6}  {c['timeout']:>7}  {c['survived']:>8}  {c['no tests']:>8}  "
            f"{c['equivalent']:>10}  {c['not checked']:>9}  {c['total']:>5}  {score:5.1f}%"
            + (f"  (baseline {c['before']:.1f}%)" if c.get("before") is not None else "")
        )
    print(
        f"equivalent includes {sum(c['wording'] for _, c in rows if c)} message-wording mutants (see is_wording) "
        f"and the entries of {EQUIVALENT_FILE.name}"
    )
    print(
        "score = (killed + timeout) / (total - equivalent - unchecked); unchecked = not reached before --timeout; "
        "'no-tests' = no selected test reached the mutated function"
    )
    ours = {n for n in stale if any(n.startswith(p) for k in keys for p in prefixes(k))}
    for name in sorted(ours):
        print(
            f"note: equivalent entry {name} is no longer a survivor (killed, renamed or gone): drop it from "
            f"{EQUIVALENT_FILE.name}"
        )
    return 0


def prefixes(key: str) -> list[str]:
    return [f.replace("/*.py", ".").replace(".py", ".").replace("/", ".") for f in MODULES[key][0]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("modules", nargs="*", help=f"any of: {', '.join(MODULES)} (default: all)")
    parser.add_argument("--changed", action="store_true", help="only the modules whose files differ from main")
    parser.add_argument("--report", action="store_true", help="print the last results without running")
    parser.add_argument("--markdown", action="store_true", help="print the last results as the docs/mutation.md table")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MUTATION_JOBS", "2")))
    parser.add_argument(
        "--timeout", type=int, default=int(os.environ.get("MUTATION_TIMEOUT", "1800")), help="seconds per module"
    )
    parser.add_argument(
        "--survivors", action="store_true", help="re-run only the mutants the last run of each module left undetected"
    )
    parser.add_argument(
        "--combine",
        metavar="JSON",
        help="merge another run's results of one module (the other backend's, say) into the last: a mutant "
        "either run detected is detected; then print the table",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--collect", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one, args.jobs, args.survivors)
        return 0
    if args.collect:
        collect(args.collect, args.survivors)
        return 0
    keys = changed_modules() if args.changed else (args.modules or list(MODULES))
    unknown = [k for k in keys if k not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {unknown}; known: {', '.join(MODULES)}")
    if args.markdown:
        markdown(keys)
        return 0
    if args.combine:
        if len(keys) != 1:
            parser.error("--combine takes one module")
        combine(keys[0], Path(args.combine))
        return report(keys)
    if not args.report:
        for key in keys:
            fresh_mutants_dir()
            if not args.survivors:
                (OUT / f"{key}.json").unlink(missing_ok=True)
            extra = ["--survivors"] if args.survivors else []
            OUT.mkdir(parents=True, exist_ok=True)
            log = OUT / f"{key}.log"
            started = time.monotonic()
            print(f"[mutation] {key}: running (log {log.relative_to(ROOT)}) ...", flush=True)
            with log.open("w") as out:
                proc = subprocess.Popen(
                    [sys.executable, __file__, "--one", key, "--jobs", str(args.jobs), *extra],
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                try:
                    proc.wait(timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait()
                    time.sleep(2)  # let the killed mutant workers go before their files are read
                    print(f"[mutation] {key}: stopped after {args.timeout}s (raise --timeout)")
            print(f"[mutation] {key}: exit {proc.returncode} in {time.monotonic() - started:.0f}s", flush=True)
            with log.open("a") as out:
                subprocess.run(
                    [sys.executable, __file__, "--collect", key, *extra],
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    check=False,
                )
            if os.environ.get("MUTATION_BASELINE") == "1" and (OUT / f"{key}.json").exists():
                shutil.copy(OUT / f"{key}.json", OUT / f"{key}.baseline.json")
        fresh_mutants_dir()
    return report(keys)


if __name__ == "__main__":
    sys.exit(main())
