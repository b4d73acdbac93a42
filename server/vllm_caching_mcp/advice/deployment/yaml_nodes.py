"""A YAML reader that keeps each value's line and path, with the shape bounds (depth, aliases, nodes)
checked before anything is built."""

from __future__ import annotations

from typing import Any, NamedTuple

import yaml

from ...knowledge import SAFE_LOADER
from ..common import AdviceError
from .bounds import MAX_ALIAS_CHARS, MAX_ALIAS_NODES, MAX_YAML_DEPTH, MAX_YAML_NODES, Totals, clip
from .model import Document, Location

PATH_KEY_CHARS = 80  # a longer key is shortened in paths, which every node below it repeats


_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKey(NamedTuple):
    """A key written twice in one mapping: PyYAML keeps the later value without a word; Kubernetes'
    strict decoding and kustomize refuse the document."""

    key: str
    path: str  # of the mapping
    first: int  # line of the first one
    again: int  # line of the one that wins


class Located:
    """A YAML value with the line it starts on; its path is put together from its parents when asked for,
    so a long key is not copied into every node below it."""

    __slots__ = ("block", "file", "line", "parent", "step", "value")

    def __init__(self, line: int, parent: Located | None = None, step: str = "") -> None:
        self.file: str | None = None  # the patch a kustomize overlay merged this node in from
        self.value: Any = None
        self.line = line
        self.parent = parent
        self.step = step  # ".key" or "[3]": the part of the path this node adds
        self.block = False  # a literal or folded block scalar: its text starts on the next line

    @property
    def text_line(self) -> int:
        """The line its text starts on: the next one for a block scalar (`key: |`)."""
        return self.line + (1 if self.block else 0)

    @property
    def path(self) -> str:
        steps = []
        node: Located | None = self
        while node is not None:
            steps.append(node.step)
            node = node.parent
        return "".join(reversed(steps)).removeprefix(".")

    def get(self, key: str) -> Any:
        """The `Located` under ``key``, or None (typed Any: manifests are walked by hand, key by key)."""
        if isinstance(self.value, dict):
            found = self.value.get(key)
            return found if isinstance(found, Located) else None
        return None

    def each(self, key: str) -> list[Located]:
        """The list items under ``key``; empty when the key is missing or not a list."""
        found = self.get(key)
        return found.items() if found is not None else []

    def items(self) -> list[Located]:
        return [v for v in self.value if isinstance(v, Located)] if isinstance(self.value, list) else []

    def plain(self) -> Any:
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag


class _YamlReader:
    """Builds `Located` trees from PyYAML nodes of one text, with YAML merge keys (``<<: *base``)."""

    def __init__(self, name: str, first_line: int) -> None:
        self.name = name
        self.first_line = first_line
        # A constructor per text: it remembers every node it built, so a shared one grows without
        # end in a long-running server (and is not safe to share between threads).
        self.constructor = yaml.constructor.SafeConstructor()
        self.merged: dict[int, list[tuple[yaml.Node, yaml.Node]]] = {}
        self.duplicates: list[DuplicateKey] = []

    def located(self, node: yaml.Node, parent: Located | None = None, step: str = "") -> Located:
        item = Located(node.start_mark.line + self.first_line, parent, step)
        if isinstance(node, yaml.MappingNode):
            self.note_duplicates(node, item)
            mapping: dict[str, Located] = {}
            for key_node, value_node in self.pairs(node):
                key = str(self.construct(key_node))
                mapping[key] = self.located(value_node, item, "." + clip(key, PATH_KEY_CHARS))
            item.value = mapping
        elif isinstance(node, yaml.SequenceNode):
            item.value = [self.located(v, item, f"[{i}]") for i, v in enumerate(node.value)]
        else:
            assert isinstance(node, yaml.ScalarNode)
            item.value = self.construct(node)
            item.block = node.style in ("|", ">")
        return item

    def note_duplicates(self, node: yaml.MappingNode, item: Located) -> None:
        """Keys the mapping itself writes twice (a key that overrides a merged ``<<`` one is meant)."""
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            line = key_node.start_mark.line + self.first_line
            if key_node.value in seen:
                self.duplicates.append(DuplicateKey(key_node.value, item.path, seen[key_node.value], line))
            seen[key_node.value] = line

    def pairs(self, node: yaml.MappingNode) -> list[tuple[yaml.Node, yaml.Node]]:
        """The key and value nodes with merge keys expanded: the mapping's own keys win, then the
        merged mappings in the order written (PyYAML's rule). Remembered per node: an anchor is
        flattened once however often it is merged."""
        known = self.merged.get(id(node))
        if known is not None:
            return known
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in reversed(sources):
                if not isinstance(source, yaml.MappingNode):
                    raise self.error(source, "a merge key (<<) takes a mapping or a list of mappings")
                merged += self.pairs(source)
        self.merged[id(node)] = merged + own
        return merged + own

    def construct(self, node: yaml.Node) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except Exception as exc:  # PyYAML's constructors on any text: ValueError, IndexError ('!!int '), ...
            raise self.error(node, self.why_not(node, exc)) from None

    def why_not(self, node: yaml.Node, exc: Exception) -> str:
        tag = _short_tag(node.tag)
        if tag == "!!value":
            return "the value '=' cannot be read: YAML takes a lone = for its 'value' key; quote it"
        if isinstance(exc, yaml.constructor.ConstructorError) and "could not determine a constructor" in str(exc):
            return f"the tag {clip(tag, 80)} is not one the safe YAML loader reads; remove it or quote the value"
        detail = exc.problem if isinstance(exc, yaml.MarkedYAMLError) else str(exc)
        shown = clip(repr(node.value), 60) if isinstance(node, yaml.ScalarNode) else f"this {tag} node"
        return f"the value {shown} cannot be read as {clip(tag, 80)}: {clip(detail or type(exc).__name__, 120)}"

    def error(self, node: yaml.Node, problem: str) -> AdviceError:
        return AdviceError("text", f"{self.name}, line {node.start_mark.line + self.first_line}: {problem}")


class _Size(NamedTuple):
    """What a YAML node stands for with its aliases expanded."""

    nodes: int
    chars: int  # in its scalars
    height: int  # levels of nesting, itself included


def _check_yaml_shape(name: str, text: str, first_line: int, totals: Totals) -> None:
    """Refuse a YAML document nested deeper than MAX_YAML_DEPTH (aliases expanded), with a recursive
    alias, or whose aliases add more than MAX_ALIAS_NODES nodes or MAX_ALIAS_CHARS characters; and
    count its nodes into ``totals``, refusing the text that takes them past MAX_YAML_NODES.

    Reads libyaml's event stream, which builds nothing and stops at the first offence, so the
    check costs one pass however the document is built; the size of an anchored node is known
    when its end goes by."""
    number = 0
    anchors: dict[str, _Size] = {}
    open_anchors: set[str] = set()
    stack: list[tuple[list[int], str | None]] = []  # ([nodes, chars, height below], anchor) of open collections
    added = [0, 0]  # nodes and characters the aliases add

    def refuse(problem: str, event: yaml.Event | None = None) -> AdviceError:
        line = f", line {_line_of(event, first_line)}" if event is not None else ""
        return AdviceError("text", f"{name}, YAML document {number}{line}: {problem}")

    for event in yaml.parse(text, Loader=SAFE_LOADER):
        if totals.yaml_nodes > MAX_YAML_NODES:
            raise AdviceError(
                "text",
                f"{name}: more than {MAX_YAML_NODES:,} YAML nodes in the documents together; give the manifests "
                "of the vLLM servers and what they use",
            )
        if isinstance(event, yaml.DocumentStartEvent):
            number += 1
            anchors, open_anchors, added = {}, set(), [0, 0]
            continue
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_YAML_DEPTH:
                raise refuse(f"nested more than {MAX_YAML_DEPTH} levels deep; manifests nest a few dozen", event)
            stack.append(([1, 0, 0], event.anchor))
            totals.yaml_nodes += 1
            if event.anchor is not None:
                open_anchors.add(event.anchor)
            continue
        anchor: str | None = None
        if isinstance(event, yaml.ScalarEvent):
            size, anchor = _Size(1, len(event.value), 1), event.anchor
            totals.yaml_nodes += 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise AdviceError(
                    "text",
                    f"{name}, line {_line_of(event, first_line)}: the alias *{clip(str(event.anchor), 40)} "
                    "is inside the node it names (a recursive structure)",
                )
            size = anchors.get(str(event.anchor), _Size(1, 0, 1))  # an unknown alias: the composer reports it
            added = [added[0] + size.nodes, added[1] + size.chars]
            totals.yaml_nodes += size.nodes
            if len(stack) + size.height > MAX_YAML_DEPTH:
                raise refuse(f"nested more than {MAX_YAML_DEPTH} levels deep through its aliases", event)
            if added[0] > MAX_ALIAS_NODES:
                raise refuse(f"expands to more than {MAX_ALIAS_NODES:,} nodes through its aliases (an alias bomb?)")
            if added[1] > MAX_ALIAS_CHARS:
                raise refuse(f"expands to more than {MAX_ALIAS_CHARS:,} characters through its aliases")
        elif isinstance(event, yaml.CollectionEndEvent):
            (nodes, chars, below), anchor = stack.pop()
            size = _Size(nodes, chars, below + 1)
            open_anchors.discard(anchor)
        else:
            continue
        if anchor is not None:
            anchors[anchor] = size
        if stack:
            parent = stack[-1][0]
            parent[0] += size.nodes
            parent[1] += size.chars
            parent[2] = max(parent[2], size.height)


def _line_of(event: yaml.Event, first_line: int) -> int:
    return (event.start_mark.line if event.start_mark is not None else 0) + first_line


def _yaml_problem(exc: yaml.YAMLError, first_line: int) -> str:
    """PyYAML's several-line message as one line: what went wrong, and where."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return clip(" ".join(str(exc).split()), 200)
    problem = ": ".join(part for part in (exc.context, exc.problem) if part)
    mark = exc.problem_mark or exc.context_mark
    where = f" (line {mark.line + first_line}, column {mark.column + 1})" if mark is not None else ""
    return clip(problem, 200) + where


def load_yaml(
    name: str, text: str, totals: Totals, first_line: int = 1, duplicates: list[DuplicateKey] | None = None
) -> list[Located]:
    """The YAML documents in ``text``; AdviceError("text", ...) when this reader cannot take it. Keys
    written twice in one mapping are added to ``duplicates`` when it is given."""
    try:
        _check_yaml_shape(name, text, first_line, totals)
        nodes = list(yaml.compose_all(text, Loader=SAFE_LOADER))
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(getattr(exc, "problem", "")):
            # PyYAML 6.0.4's scanner has a nesting limit of its own, met while it reads ahead of the
            # events _check_yaml_shape counts: the same refusal, in the same words.
            raise AdviceError(
                "text", f"{name}: nested more than {MAX_YAML_DEPTH} levels deep; manifests nest a few dozen"
            ) from None
        raise AdviceError("text", f"{name} is not valid YAML: {_yaml_problem(exc, first_line)}") from None
    reader = _YamlReader(name, first_line)
    roots = [reader.located(n) for n in nodes if n is not None]
    if duplicates is not None:
        duplicates += reader.duplicates
    return roots


def text_of(item: Located | None) -> str:
    if item is None:
        return ""
    v = item.value
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def node_location(doc: Document, item: Located, prefix: str = "") -> Location:
    path = f"{prefix}{item.path}" if prefix and item.path else (item.path or prefix or None)
    return Location(file=item.file or doc.name, line=item.text_line, path=path)
