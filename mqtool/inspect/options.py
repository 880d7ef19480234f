"""Which `inspect` options each view takes, declared once; a misplaced option is an error, not ignored.

Every view lists the view-specific options it reads (`VIEWS`); `check_view_options` refuses an option
given to a view that does not take it, and `check_only` an option outside a fixed set (a single-file
dump, the index view without a lookup). Names are the command-line spellings, so the messages name
what the user typed. Imports nothing heavy: `mqtool inspect` checks its options before it opens a store.
"""

from __future__ import annotations

from collections.abc import Mapping

from mqtool.errors import MqtoolError

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
    "transactions": (),
    "restart": ("--at", "--for", "--events"),
    "retry": ("--group",),
    "index": ("--key", "--uniq-key", "--topic", "--limit", "--begin", "--end", "--format", "--output"),
}

# The order options are checked in (the first misplaced one is reported).
OPTION_ORDER = ("--from-offset", "--to-offset", "--key", "--uniq-key", "--tag", "--since", "--until", "--topic",
                "--queue-id", "--limit", "--begin", "--end", "--body", "--decompress", "--offset", "--from", "--at",
                "--for", "--events", "--format", "--output", "--group")

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


def check_options(view: str, given: Mapping[str, bool], single_file: object | None = None) -> None:
    """All of `inspect`'s per-view option checks: a single file (the path as given) is dumped by its
    kind (no VIEW, only `DUMP_OPTIONS`); a store view takes only its own options."""
    if single_file is not None:
        if view != OVERVIEW:
            raise OptionError(f"{single_file} is a single file: it is dumped by its kind, "
                              "VIEW applies to a store directory")
        check_only(given, DUMP_OPTIONS, "a single-file dump")
    else:
        check_view_options(view, given)
