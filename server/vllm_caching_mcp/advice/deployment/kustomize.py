"""kustomize: the resources a kustomization names, with its patches and image rewrites applied, as
a pre-pass that yields the documents the readers read."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..common import AdviceError
from .bounds import Totals, clip, reading_document
from .images import image_version
from .model import Document, Location
from .yaml_nodes import PATH_KEY_CHARS, Located, load_yaml, text_of

_KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


# Lists a strategic merge joins item by item, by this key (the patchMergeKey of the Kubernetes API).
# Another list of mappings is joined by name when every item has one, as kustomize does for kinds it
# has no schema for (LeaderWorkerSet); any other list (args, command) is replaced.
_MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
    "volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name",
}  # fmt: skip


# A patch is copied into every object it selects: bounded like YAML aliases, so a patch selecting
# every object of a large file, in many overlays, costs no more than a large file does.
MAX_PATCHED_NODES = 1_000_000


_RESOURCE_FILE = (".yaml", ".yml", ".json")


@dataclass
class Patch:
    source: str  # where it is written, for notes: "kustomization.yaml:4 (patches[0]) patch.yaml"
    objects: list[Located]  # a strategic-merge patch: the objects it merges in
    operations: list[Located]  # a JSON 6902 patch: its operations
    target: dict[str, str] | None  # the target selector given; else each patch object selects its kind and name
    applied: int = 0  # objects it was applied to, over every build
    document: str = ""  # the kustomization it is written in, or the document that holds it


@dataclass
class Overlay:
    """One kustomization: what it includes, its patches and image rewrites, in the order kustomize applies them."""

    name: str
    resources: list[Located]
    patches: list[Patch]
    images: list[Located]


@dataclass
class _Builds:
    """What the kustomizations among the documents build."""

    # resource document → the overlays of each build that includes it, innermost (the base's own) first
    chains: dict[str, list[list[Overlay]]] = field(default_factory=dict)
    consumed: set[str] = field(default_factory=set)  # kustomizations and patches: read through what they patch
    overlays: list[Overlay] = field(default_factory=list)
    built: set[str] = field(default_factory=set)  # kustomizations that build a resource among the documents

    def alone(self) -> list[Overlay]:
        """The kustomizations none of whose resources is among the documents: they hold no server themselves."""
        return [overlay for overlay in self.overlays if overlay.name not in self.built]

    def unapplied(self) -> list[str]:
        return [
            f"{patch.source}: its target ({_selector_text(patch)}) is not among the files; the patch is not applied"
            for overlay in self.overlays
            if overlay.name in self.built  # what_it_sets tells of the patches of the others
            for patch in overlay.patches
            if not patch.applied
        ]


# kustomize's own marker, for a kustomization given under another file name (`overlay-kustomization.yaml`):
# its apiVersion and kind, each on a top-level line
_API = re.compile(r"apiVersion:\s*['\"]?kustomize\.config\.k8s\.io/")
_KIND = re.compile(r"kind:\s*['\"]?Kustomization\b")


def _is_kustomization(name: str, text: str = "") -> bool:
    """A kustomization: by its file name, as kustomize finds one, or by the apiVersion and kind it declares."""
    if name.rsplit("/", 1)[-1] in _KUSTOMIZATION_FILES:
        return True
    if "Kustomization" not in text[:20_000]:
        return False
    lines = text[:20_000].splitlines()
    return any(_API.match(line) for line in lines) and any(_KIND.match(line) for line in lines)


def _at(name: str, item: Located) -> Location:
    return Location(file=item.file or name, line=item.line, path=item.path or None)


def _documents_at(path: str, here: str, names: list[str]) -> list[str]:
    """The documents a kustomization's relative ``path`` may name: those sharing the most trailing path
    parts with it (documents are often given by their file name alone)."""
    wanted = posixpath.normpath(posixpath.join(here, path)).split("/")
    best: list[str] = []
    score = 0
    for name in names:
        parts = posixpath.normpath(name).split("/")
        common = 0
        while common < min(len(parts), len(wanted)) and parts[-1 - common] == wanted[-1 - common]:
            common += 1
        if common and common > score:
            best, score = [name], common
        elif common and common == score:
            best.append(name)
    return best


def _mark_file(node: Located, name: str) -> None:
    node.file = name
    for child in node.value.values() if isinstance(node.value, dict) else node.items():
        _mark_file(child, name)


def read_builds(documents: list[Document], totals: Totals) -> tuple[_Builds, list[str]]:
    """Every kustomization among the documents, which resource documents each build patches, and notes."""
    builds, notes = _Builds(), list[str]()
    overlays: dict[str, Overlay] = {}
    for index, doc in enumerate(documents):
        if _is_kustomization(doc.name, doc.text):
            with reading_document(index):
                roots = load_yaml(doc.name, doc.text, totals)
                if len(roots) != 1 or not isinstance(roots[0].value, dict):
                    raise AdviceError("text", f"{doc.name}: a kustomization is one YAML mapping")
                overlays[doc.name] = _read_kustomization(doc.name, roots[0], documents, totals, builds, notes)
    builds.consumed |= overlays.keys()
    builds.overlays = list(overlays.values())
    names = [d.name for d in documents]
    nested = {
        inner
        for overlay in overlays.values()
        for item in overlay.resources
        for inner in _kustomization_at(text_of(item), overlay.name, list(overlays))
    }
    for name, overlay in overlays.items():
        if name not in nested:
            for resource, chain in _build(overlay, overlays, names, notes, (name,)):
                builds.chains.setdefault(resource, []).append(chain)
                builds.built |= {o.name for o in chain}
    return builds, notes


def what_it_sets(overlay: Overlay, read_alone: bool) -> list[str]:
    """What a kustomization that builds nothing among the documents says: that it holds no server (when
    none of its patches was ``read_alone`` either), the images it sets (and the vLLM release a tag names),
    what its patches select, and the files to give with it."""
    resources = ", ".join(clip(text_of(r), 120) for r in overlay.resources) or "no resources"
    holds = "only its patches are read" if read_alone else "it holds no vLLM server itself"
    notes = [
        f"{overlay.name}: a kustomization whose resources ({resources}) are not among the files, so {holds}: give "
        "those files with it to review the servers it builds"
    ]
    for entry in overlay.images:
        new_name, new_tag, digest = (entry.get(k) for k in ("newName", "newTag", "digest"))
        name = text_of(new_name) if new_name is not None else text_of(entry.get("name"))
        image = name + ("@" + text_of(digest) if digest is not None else ":" + text_of(new_tag) if new_tag else "")
        release = image_version(image)
        named = f" (vLLM {release})" if release is not None else ""
        original = clip(text_of(entry.get("name")), 120)
        notes.append(f"{_at(overlay.name, entry)}: images sets {original} to {clip(image, 160)}{named}")
    for patch in overlay.patches:
        notes.append(f"{patch.source}: a patch of {clip(_selector_text(patch), 200) or 'no object named'}")
    return notes


def _kustomization_at(resource: str, kustomization: str, kustomizations: list[str]) -> list[str]:
    """The kustomization among the documents that a directory resource names, as a list of none or one."""
    if resource.endswith(_RESOURCE_FILE):
        return []
    here = posixpath.dirname(kustomization)
    found = [k for f in _KUSTOMIZATION_FILES for k in _documents_at(f"{resource}/{f}", here, kustomizations)]
    # Given by file name alone, every kustomization shares one part with the path: the directory must match too.
    found = [k for k in found if k != kustomization and "/" in k]
    return found if len(found) == 1 else []


def _build(
    overlay: Overlay, overlays: dict[str, Overlay], names: list[str], notes: list[str], seen: tuple[str, ...]
) -> list[tuple[str, list[Overlay]]]:
    """(resource document, overlays innermost first) for what ``overlay`` builds."""
    found: list[tuple[str, list[Overlay]]] = []
    here = posixpath.dirname(overlay.name)
    for item in overlay.resources:
        resource = text_of(item)
        inner = _kustomization_at(resource, overlay.name, list(overlays))
        if inner and inner[0] not in seen:
            below = _build(overlays[inner[0]], overlays, names, notes, (*seen, inner[0]))
            found += [(document, [*chain, overlay]) for document, chain in below]
            continue
        matches = [m for m in _documents_at(resource, here, names) if not _is_kustomization(m) and m not in overlays]
        if len(matches) == 1 and resource.endswith(_RESOURCE_FILE):
            found.append((matches[0], [overlay]))
            continue
        what = f"matches several documents ({', '.join(matches)})" if len(matches) > 1 else "is not among the documents"
        notes.append(f"{_at(overlay.name, item)}: resource {clip(resource, 200)} {what}; its objects are not reviewed")
    return found


def _read_kustomization(
    name: str, root: Located, documents: list[Document], totals: Totals, builds: _Builds, notes: list[str]
) -> Overlay:
    for key in ("resources", "bases", "images", "patchesStrategicMerge", "patches", "patchesJson6902"):
        given = root.get(key)
        if given is not None and not isinstance(given.value, list):
            notes.append(f"{_at(name, given)}: {key} takes a list; what is given is not read")
    overlay = Overlay(name=name, resources=root.each("resources") + root.each("bases"), patches=[], images=[])
    overlay.images = [i for i in root.each("images") if isinstance(i.value, dict) and i.get("name") is not None]
    for key in ("patchesStrategicMerge", "patches", "patchesJson6902"):
        for entry in root.each(key):
            patch = _read_patch(name, entry, documents, totals, builds, notes)
            if patch is not None:
                overlay.patches.append(patch)
    return overlay


def _read_patch(
    name: str, entry: Located, documents: list[Document], totals: Totals, builds: _Builds, notes: list[str]
) -> Patch | None:
    """One entry of patches / patchesStrategicMerge / patchesJson6902: a file among the documents or inline."""
    where = _at(name, entry)
    inline = entry.get("patch") if isinstance(entry.value, dict) else entry if "\n" in text_of(entry) else None
    path = entry.get("path") if isinstance(entry.value, dict) else None if inline is not None else entry
    if inline is not None:
        roots = load_yaml(name, text_of(inline), totals, inline.text_line)
        file, source = name, f"{where}"
    elif path is not None:
        matches = _documents_at(text_of(path), posixpath.dirname(name), [d.name for d in documents])
        if len(matches) != 1:
            notes.append(f"{where}: patch {clip(text_of(path), 200)} is not among the documents; it is not applied")
            return None
        [document] = [d for d in documents if d.name == matches[0]]
        roots = load_yaml(document.name, document.text, totals)
        file, source = document.name, f"{where} {document.name}"
        builds.consumed.add(document.name)
    else:
        notes.append(f"{where}: a patch entry without path or patch; it is not applied")
        return None
    for node in roots:
        _mark_file(node, file)
    target_item = entry.get("target") if isinstance(entry.value, dict) else None
    target = None
    if target_item is not None and isinstance(target_item.value, dict):
        target = {k: text_of(v) for k, v in target_item.value.items() if not isinstance(v.value, (dict, list))}
    problem = _target_problem(target) if target is not None else None
    if problem is not None:
        notes.append(f"{where}: {problem}; the patch is not applied")
        return None
    if len(roots) == 1 and isinstance(roots[0].value, list):
        if target is None:
            notes.append(f"{where}: a JSON 6902 patch without a target; it is not applied")
            return None
        return Patch(source=source, objects=[], operations=roots[0].items(), target=target, document=file)
    objects = [r for r in roots if isinstance(r.value, dict)]
    return Patch(source=source, objects=objects, operations=[], target=target, document=file)


# A target's name is a regular expression (Go's, which takes linear time); Python's backtracks, so only
# patterns that cannot backtrack far are evaluated: names, dots, stars and alternatives, a few stars.
_SIMPLE_NAME_PATTERN = re.compile(r"\^?[\w.\-|*]*\$?")


_LABEL_TERM = re.compile(r"(!?)([^=!\s]+)\s*(?:(==|=|!=)\s*(\S*))?")


def _target_problem(target: dict[str, str]) -> str | None:
    """Why this reader cannot evaluate a patch target, when it cannot."""
    name = target.get("name", "")
    if not _SIMPLE_NAME_PATTERN.fullmatch(name) or name.count("*") > 4:
        shown = clip(name, 100)
        return f"the target name {shown!r} is a regular expression not evaluated here (only names, ., * and |)"
    terms = [t.strip() for t in target.get("labelSelector", "").split(",") if t.strip()]
    if not all(_LABEL_TERM.fullmatch(t) for t in terms):
        return "its labelSelector is not read here (only equality terms: app=x, app!=x, app, !app)"
    return None


def _selector_text(patch: Patch) -> str:
    if patch.target is not None:
        return ", ".join(f"{k} {v}" for k, v in patch.target.items())
    return "; ".join(f"{text_of(o.get('kind'))}/{_object_name(o)}" for o in patch.objects)


def _object_name(obj: Located) -> str:
    meta = obj.get("metadata")
    return text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else ""


def _selects(obj: Located, selector: Mapping[str, str], name_pattern: bool) -> bool:
    """Whether a target selector (kind, name, namespace, group, version, labelSelector) picks ``obj``."""
    meta = obj.get("metadata")
    group, _, version = text_of(obj.get("apiVersion")).rpartition("/")
    namespace = text_of(meta.get("namespace")) if meta is not None and meta.get("namespace") is not None else ""
    labels = meta.get("labels").plain() if meta is not None and meta.get("labels") is not None else {}
    wanted_name = selector.get("name")
    if wanted_name is not None:
        if not name_pattern:
            wanted_name = re.escape(wanted_name)
        try:  # kustomize reads a target's name as an anchored regular expression
            if re.fullmatch(wanted_name, _object_name(obj)) is None:
                return False
        except re.error:
            if selector["name"] != _object_name(obj):
                return False
    checks = (("kind", text_of(obj.get("kind"))), ("group", group), ("version", version))
    if any(key in selector and selector[key] != actual for key, actual in checks):
        return False
    if selector.get("namespace") and namespace and selector["namespace"] != namespace:
        return False
    return _labels_match(selector.get("labelSelector"), labels if isinstance(labels, dict) else {})


def _labels_match(selector: str | None, labels: dict[str, Any]) -> bool:
    """A label selector of equality terms (``app=vllm,tier!=cache``, ``app``, ``!app``), as kustomize reads one."""
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        m = _LABEL_TERM.fullmatch(term)
        if m is None:
            return False
        negated, key, op, value = m.groups()
        if op is None:
            if (key in labels) == bool(negated):
                return False
        elif (key in labels and str(labels[key]) == value) == (op == "!="):
            return False
    return True


class Patcher:
    """Applies the patches of a build to the objects of one resource document."""

    def __init__(self, totals: Totals, notes: list[str]) -> None:
        self.totals = totals
        self.notes = notes

    def apply(self, doc: Document, objects: list[Located], chain: list[Overlay]) -> None:
        for overlay in chain:
            applied: list[str] = []
            for patch in overlay.patches:
                if self.patch(objects, patch):
                    applied.append(patch.source)
            for obj in objects:
                _rewrite_images(doc, obj, overlay, self.notes)
            with_patches = f", with {'; '.join(applied)}" if applied else ""
            self.notes.append(f"{doc.name}: reviewed as {overlay.name} builds it{with_patches}")

    def patch(self, objects: list[Located], patch: Patch) -> bool:
        """Apply one patch to the objects it selects; whether it selected any."""
        selected = 0
        for obj in objects:
            if patch.operations and patch.target is not None and _selects(obj, patch.target, True):
                selected += 1
                for operation in patch.operations:
                    self.operate(obj, operation, patch.source)
            for patch_object in patch.objects:
                if patch.target is not None:
                    chosen = _selects(obj, patch.target, True)
                else:
                    own = {"kind": text_of(patch_object.get("kind")), "name": _object_name(patch_object)}
                    chosen = _selects(obj, own, False)
                if chosen:
                    selected += 1
                    self.merge(obj, patch_object)
        patch.applied += selected
        return selected > 0

    def copy(self, node: Located, parent: Located, step: str) -> Located:
        self.totals.patched_nodes += 1
        if self.totals.patched_nodes > MAX_PATCHED_NODES:
            raise AdviceError(
                "documents",
                f"kustomize patches copy more than {MAX_PATCHED_NODES:,} values into the objects they select; "
                "no deployment's overlays are that large",
            )
        new = Located(node.line, parent, step)
        new.file, new.block = node.file, node.block
        if isinstance(node.value, dict):
            new.value = {
                k: self.copy(v, new, "." + clip(k, PATH_KEY_CHARS)) for k, v in node.value.items() if k[:1] != "$"
            }
        elif isinstance(node.value, list):
            new.value = [self.copy(v, new, f"[{i}]") for i, v in enumerate(node.items())]
        else:
            new.value = node.value
        return new

    def merge(self, base: Located, patch: Located) -> None:
        """A strategic merge of mapping ``patch`` into mapping ``base``, with its $patch directives."""
        if _directive(patch) == "replace":
            base.value = self.copy(patch, base.parent or base, base.step).value
            for child in base.value.values():
                child.parent = base
            return
        for key, item in patch.value.items():
            if key.startswith("$"):
                continue  # $patch, $setElementOrder/…, $retainKeys: directives, not fields
            current = base.value.get(key)
            if item.value is None or _directive(item) == "delete":
                base.value.pop(key, None)
            elif current is not None and isinstance(current.value, dict) and isinstance(item.value, dict):
                self.merge(current, item)
            elif current is not None and isinstance(current.value, list) and isinstance(item.value, list):
                merge_key = _merge_key(key, current.items() + item.items())
                if merge_key is None:
                    base.value[key] = self.copy(item, base, current.step)
                else:
                    self.merge_list(current, item, merge_key)
            else:
                base.value[key] = self.copy(item, base, "." + clip(key, PATH_KEY_CHARS))

    def merge_list(self, base: Located, patch: Located, key: str) -> None:
        for item in patch.items():
            ident = item.get(key) if isinstance(item.value, dict) else None
            match = next((b for b in base.items() if ident is not None and _same_key(b, key, ident)), None)
            if _directive(item) == "delete":
                if match is not None:
                    base.value.remove(match)
            elif match is not None and isinstance(match.value, dict):
                self.merge(match, item)
            else:
                base.value.append(self.copy(item, base, f"[{len(base.value)}]"))
        _renumber(base)

    def operate(self, obj: Located, operation: Located, source: str) -> None:
        """One JSON 6902 operation (add, replace, remove) on ``obj``; a note when it cannot be applied."""
        op, path = text_of(operation.get("op")), text_of(operation.get("path"))
        shown = f"{source}: {clip(op, 20)} {clip(path, 200)} on {text_of(obj.get('kind'))}/{_object_name(obj)}"
        if op not in ("add", "replace", "remove"):
            self.notes.append(f"{shown}: only add, replace and remove are applied here; this operation is not")
            return
        value = operation.get("value")
        steps = [s.replace("~1", "/").replace("~0", "~") for s in path.split("/")[1:]] if path[:1] == "/" else []
        parent: Located | None = obj
        for step in steps[:-1]:
            parent = _child(parent, step) if parent is not None else None
        if not steps or parent is None or (op != "remove" and value is None):
            self.notes.append(f"{shown}: the path is not in the object, or the value is missing; it is not applied")
            return
        if not self.operate_at(parent, steps[-1], op, value):
            self.notes.append(f"{shown}: {steps[-1]!r} is not there to {op}; it is not applied")

    def operate_at(self, parent: Located, last: str, op: str, value: Located | None) -> bool:
        if isinstance(parent.value, dict):
            if op != "add" and last not in parent.value:
                return False
            if op == "remove":
                del parent.value[last]
            else:
                assert value is not None
                parent.value[last] = self.copy(value, parent, "." + clip(last, PATH_KEY_CHARS))
            return True
        if not isinstance(parent.value, list):
            return False
        count = len(parent.value)
        index = count if last == "-" and op == "add" else int(last) if last.isdigit() else count + 1
        if index > count or (op != "add" and index == count):
            return False
        if op == "remove":
            del parent.value[index]
        else:
            assert value is not None
            new = self.copy(value, parent, "")
            parent.value[index : index + (op == "replace")] = [new]
        _renumber(parent)
        return True


def _same_key(item: Located, key: str, ident: Located) -> bool:
    own = item.get(key)
    return own is not None and bool(own.value == ident.value)


def _directive(node: Located) -> str | None:
    found = node.get("$patch") if isinstance(node.value, dict) else None
    return text_of(found) if found is not None else None


def _merge_key(field_name: str, items: list[Located]) -> str | None:
    if not items or not all(isinstance(i.value, dict) for i in items):
        return None
    if field_name in _MERGE_KEYS:
        return _MERGE_KEYS[field_name]
    return "name" if all("name" in i.value for i in items) else None


def _child(node: Located, step: str) -> Located | None:
    if isinstance(node.value, dict):
        found: Located | None = node.get(step)
        return found
    items = node.items()
    return items[int(step)] if step.isdigit() and int(step) < len(items) else None


def _renumber(node: Located) -> None:
    for i, item in enumerate(node.items()):
        item.step, item.parent = f"[{i}]", node


def _image_nodes(node: Located) -> Iterator[Located]:
    """The image of every container and init container under ``node``."""
    if not isinstance(node.value, dict):
        yield from (found for child in node.items() for found in _image_nodes(child))
        return
    for key, child in node.value.items():
        if key in ("containers", "initContainers"):
            yield from (c.get("image") for c in child.items() if c.get("image") is not None)
        elif isinstance(child.value, (dict, list)):
            yield from _image_nodes(child)


def _retagged(old: str, written: str, new: str, setter: str, notes: list[str]) -> None:
    """Say which release runs where an overlay's images: rewrites an image whose tag names a vLLM release."""
    before, after = image_version(old), image_version(new)
    if before is None or before == after:
        return
    runs = f"vLLM {after} is reviewed, not {before}" if after else f"the vLLM release is not {before}, and not known"
    notes.append(
        f"{setter}: images: makes {clip(old, 80)} (written at {written}) {clip(new, 80)}: the build deploys the "
        f"overlay's image, so {runs}"
    )


def _rewrite_images(doc: Document, obj: Located, overlay: Overlay, notes: list[str]) -> None:
    """kustomize's images: an image named ``name`` becomes newName, with newTag or digest, where it is set;
    a note where that changes the vLLM release the base's image names."""
    rules = {text_of(entry.get("name")): entry for entry in overlay.images}
    for node in _image_nodes(obj) if rules else ():
        image = text_of(node)
        name, tag = (image.split("@", 1)[0], "@" + image.split("@", 1)[1]) if "@" in image else (image, "")
        if not tag and ":" in name.rsplit("/", 1)[-1]:
            name, tag = name[: name.rindex(":")], name[name.rindex(":") :]
        entry = rules.get(name)
        if entry is None:
            continue
        new_name, new_tag, digest = (entry.get(k) for k in ("newName", "newTag", "digest"))
        tag = "@" + text_of(digest) if digest is not None else ":" + text_of(new_tag) if new_tag is not None else tag
        node.value = (text_of(new_name) if new_name is not None else name) + tag
        setter = digest or new_tag or new_name or entry
        written = f"{node.file or doc.name}:{node.line}"
        node.file, node.line, node.block = overlay.name, setter.line, False
        _retagged(image, written, node.value, f"{overlay.name}:{setter.line}", notes)
