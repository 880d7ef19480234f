"""Which `inspect` options each view takes, declared once; a misplaced option is an error, not ignored.

Every view lists the view-specific options it reads (`VIEWS`); `check_view_options` refuses an option
given to a view that does not take it, `check_only` an option outside a fixed set (a single-file
dump, the index view without a lookup), and `check_required` a view without the options it cannot run
without (`REQUIRED`, the index lookup's pair). `check_global` checks the options every view shares.
Names are the command-line spellings, so the messages name what the user typed. Imports nothing heavy:
`mqtool inspect` checks its options before it opens a store.
"""

from __future__ import annotations

from collections.abc import Mapping

from mqtool.errors import MqtoolError
from mqtool.times import parse_duration_ms

OVERVIEW = "overview"

# The view-specific options of each view, views in the order `mqtool inspect --help` lists them.
VIEWS: dict[str, tuple[str, ...]] = {
    OVERVIEW: (),
    "messages": ("--from-offset", "--to-offset", "--key", "--uniq-key", "--tag", "--since", "--until", "--topic",
                 "--queue-id", "--limit", "--body", "--decompress", "--format", "--output"),
    "message": ("--body", "--decompress", "--offset"),
    "queue": ("--topic", "--queue-id", "--limit", "--body", "--decompress", "--from", "--format", "--output"),
    "delay": (),
    "timer": ("--at",),
    "transactions": ("--broker-version",),
    "restart": ("--at", "--for", "--events", "--broker-version"),
    "retry": ("--group",),
    "index": ("--key", "--uniq-key", "--topic", "--limit", "--begin", "--end", "--format", "--output"),
    "replicas": (),
    "consumers": ("--topic", "--group"),
}

# The order options are checked in (the first misplaced one is reported).
OPTION_ORDER = ("--from-offset", "--to-offset", "--key", "--uniq-key", "--tag", "--since", "--until", "--topic",
                "--queue-id", "--limit", "--begin", "--end", "--body", "--decompress", "--offset", "--from", "--at",
                "--for", "--events", "--broker-version", "--format", "--output", "--group")

# The options a view cannot run without, and what it says when one is missing.
REQUIRED: dict[str, tuple[tuple[str, ...], str]] = {
    "message": (("--offset",), "the message view needs --offset PHYS (a record's physical offset)"),
    "queue": (("--topic", "--queue-id"), "the queue view needs --topic T and --queue-id Q"),
}

DUMP_OPTIONS = ("--limit", "--body", "--decompress")  # what a single-file dump reads
INDEX_LISTING_OPTIONS = ("--expect", "--update-golden")  # the index view without --topic/--key


class OptionError(MqtoolError, ValueError):
    """An option given where it does not apply, or a view without the options it needs."""


def views_taking(option: str) -> tuple[str, ...]:
    """The views that take a view-specific option, in `VIEWS` order."""
    return tuple(view for view, options in VIEWS.items() if option in options)


def check_view_options(view: str, given: Mapping[str, bool]) -> None:
    """OptionError for the first option (`OPTION_ORDER`) set in `given` that `view` does not take."""
    for option in OPTION_ORDER:
        if given.get(option) and option not in VIEWS[view]:
            views = views_taking(option)
            plural = "s" if len(views) > 1 else ""
            raise OptionError(f"{option} applies to the {' and '.join(views)} view{plural}, not {view}")


def check_only(given: Mapping[str, bool], allowed: tuple[str, ...], what: str) -> None:
    """OptionError naming every option set in `given` (in its order) outside `allowed`."""
    extra = [o for o, v in given.items() if v and o not in allowed]
    if extra:
        raise OptionError(f"{', '.join(extra)} do{'es' if len(extra) == 1 else ''} not apply to {what}")


def check_global(given: Mapping[str, bool], limit: int | None, json_out: bool, now_given: bool) -> None:
    """OptionError for the shared options that do not fit together, checked before anything is read:
    a golden file is JSON and must not depend on the wall clock; --format writes a file, not stdout."""
    if limit is not None and limit < 0:
        raise OptionError("--limit must be >= 0")
    if given.get("--update-golden"):  # golden.py (difflib) is imported by the runs that compare or rewrite
        from mqtool.golden import check_golden_options

        check_golden_options(given.get("--expect") or None, True)
    if given.get("--expect") and not json_out:
        raise OptionError("--expect compares JSON output: add --json")
    if given.get("--expect") and not now_given:
        raise OptionError("--expect needs --now TIME: a golden file must not depend on the wall clock")
    if bool(given.get("--format")) != bool(given.get("--output")):
        raise OptionError("--format and --output go together: --format parquet --output FILE")
    if given.get("--format") and json_out:
        raise OptionError("--format writes a file: leave out --json")


def is_index_lookup(given: Mapping[str, bool]) -> bool:
    """The index view looks a key up (IndexService.queryOffset) when --topic or a key is given, else
    it lists the IndexFiles."""
    return bool(given.get("--topic") or given.get("--key") or given.get("--uniq-key"))


def check_index(given: Mapping[str, bool]) -> None:
    """OptionError unless the index view's options make a listing (no lookup options) or one lookup:
    the broker hashes TOPIC#KEY, so both halves are needed, and a KEYS word and a UNIQ_KEY share it."""
    if not is_index_lookup(given):
        check_only(given, INDEX_LISTING_OPTIONS, "the index view without --topic/--key")
        return
    if not (given.get("--topic") and (given.get("--key") or given.get("--uniq-key"))):
        raise OptionError("an index lookup needs both --topic T and --key K (the broker hashes T#K)")
    if given.get("--key") and given.get("--uniq-key"):
        raise OptionError("give --key or --uniq-key, not both: the IndexFile holds both under T#K")


def check_required(view: str, given: Mapping[str, bool]) -> None:
    """OptionError for a view missing an option it cannot run without (`REQUIRED`, `check_index`)."""
    if view == "index":
        check_index(given)
    elif view in REQUIRED:
        needed, message = REQUIRED[view]
        if not all(given.get(o) for o in needed):
            raise OptionError(message)


def check_options(view: str, given: Mapping[str, bool], single_file: object | None = None) -> None:
    """All of `inspect`'s per-view option checks: a single file (the path as given) is dumped by its
    kind (no VIEW, only `DUMP_OPTIONS`); a store view takes only its own options, and those it needs."""
    if single_file is not None:
        if view != OVERVIEW:
            raise OptionError(f"{single_file} is a single file: it is dumped by its kind, "
                              "VIEW applies to a store directory")
        check_only(given, DUMP_OPTIONS, "a single-file dump")
    else:
        check_view_options(view, given)
        check_required(view, given)


def replay_ms(text: str) -> int:
    """restart --for: the replay's length in ms; OptionError unless it is longer than 0."""
    ms = parse_duration_ms(text)
    if ms <= 0:
        raise OptionError("--for must be longer than 0 (e.g. 10m)")
    return ms
