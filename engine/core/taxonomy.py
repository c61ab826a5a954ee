"""The failure taxonomy, loaded from data (DESIGN.md, "Failure tags").

Why data: curators discover new failure modes faster than releases ship, so the list lives in
``engine/core/taxonomy.toml`` and a workspace may extend it with its own ``taxonomy.toml`` (new classes, new
subclasses, better descriptions). A workspace file can only add, never remove: a tag written yesterday
must still validate today. Invalidity and misalignment always block export whatever a file says, because
the export gate is the product's promise, not a preference.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BandpassError

DEFAULT_PATH = Path(__file__).with_name("taxonomy.toml")
WORKSPACE_FILE = "taxonomy.toml"
#: Classes whose tags keep a task out of exports, whatever a workspace file says.
ALWAYS_BLOCKING = frozenset({"invalidity", "misalignment"})
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class TaxonomyError(BandpassError, ValueError):
    """A taxonomy file is malformed, or a tag does not exist in the taxonomy; the message says which."""


@dataclass
class TagClass:
    name: str
    description: str = ""
    blocking: bool = False
    subclasses: dict[str, str] = field(default_factory=dict)  # name -> description, in file order


@dataclass
class Taxonomy:
    classes: dict[str, TagClass] = field(default_factory=dict)  # in offer order
    sources: list[Path] = field(default_factory=list)

    def names(self) -> list[str]:
        """Every ``class.subclass``, in offer order."""
        return [f"{c.name}.{s}" for c in self.classes.values() for s in c.subclasses]

    def class_at(self, number: int) -> TagClass | None:
        """The class a digit key picks (1-based, file order)."""
        items = list(self.classes.values())
        return items[number - 1] if 1 <= number <= len(items) else None

    def is_blocking(self, tag_class: str) -> bool:
        c = self.classes.get(tag_class)
        return tag_class in ALWAYS_BLOCKING or bool(c and c.blocking)

    def parse(self, code: str) -> tuple[str, str]:
        """Validates ``class.subclass`` and returns its parts; the error lists what would be valid."""
        cls_name, dot, sub = code.strip().partition(".")
        c = self.classes.get(cls_name)
        if c is None:
            raise TaxonomyError(f"unknown tag class {cls_name!r}; valid classes: {', '.join(self.classes)}")
        if not dot or sub not in c.subclasses:
            what = f"unknown subclass {sub!r} of {cls_name!r}" if dot and sub else f"{code!r} has no subclass"
            raise TaxonomyError(f"{what}; valid: {', '.join(f'{cls_name}.{s}' for s in c.subclasses)}")
        return cls_name, sub

    def describe(self, tag_class: str, subclass: str) -> str:
        c = self.classes.get(tag_class)
        return c.subclasses.get(subclass, "") if c else ""


def _merge(tax: Taxonomy, data: dict[str, Any], source: Path) -> None:
    classes = data.get("classes", {})
    if not isinstance(classes, dict):
        raise TaxonomyError(f"{source}: expected [classes.<name>] tables")
    for name, body in classes.items():
        if not _NAME.match(name):
            raise TaxonomyError(f"{source}: class name {name!r} must be lowercase letters, digits, _")
        if not isinstance(body, dict):
            raise TaxonomyError(f"{source}: [classes.{name}] must be a table")
        c = tax.classes.setdefault(name, TagClass(name))
        desc = body.get("description", c.description)
        blocking = body.get("blocking", c.blocking)
        if not isinstance(desc, str) or not isinstance(blocking, bool):
            raise TaxonomyError(f"{source}: [classes.{name}] description must be text, blocking true/false")
        c.description = desc
        c.blocking = blocking or name in ALWAYS_BLOCKING
        subs = body.get("subclasses", {})
        if isinstance(subs, list):  # a plain list of names is accepted too
            subs = {s: c.subclasses.get(s, "") for s in subs}
        if not isinstance(subs, dict):
            raise TaxonomyError(f"{source}: [classes.{name}.subclasses] must be a table or a list")
        for sub, sub_desc in subs.items():
            if not isinstance(sub, str) or not _NAME.match(sub):
                raise TaxonomyError(
                    f"{source}: subclass {sub!r} of {name!r} must be lowercase letters, digits, _"
                )
            if not isinstance(sub_desc, str):
                raise TaxonomyError(f"{source}: description of {name}.{sub} must be text")
            if sub_desc or sub not in c.subclasses:
                c.subclasses[sub] = sub_desc
    tax.sources.append(source)


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise TaxonomyError(f"{path}: cannot read taxonomy: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise TaxonomyError(f"{path}: not valid TOML: {e}") from e


def load_taxonomy(workspace_root: str | os.PathLike[str] | None = None) -> Taxonomy:
    """The default taxonomy merged with ``<workspace_root>/taxonomy.toml`` when that file exists."""
    tax = Taxonomy()
    _merge(tax, _read(DEFAULT_PATH), DEFAULT_PATH)
    if workspace_root is not None:
        extra = Path(workspace_root) / WORKSPACE_FILE
        if extra.is_file():
            _merge(tax, _read(extra), extra)
    for c in tax.classes.values():
        if not c.subclasses:
            raise TaxonomyError(f"{tax.sources[-1]}: class {c.name!r} has no subclasses")
    return tax
