"""The deployment package keeps its layout: each input shape is one reader behind one interface, and a
reader imports only the shared modules, never another reader, so a new shape is one new module."""

from __future__ import annotations

import ast
from pathlib import Path

from vllm_caching_mcp.advice import deployment
from vllm_caching_mcp.advice.deployment import read

PACKAGE = Path(deployment.__file__).parent
# What readers may import from the package: the shared modules and the interface.
SHARED = {
    "model", "bounds", "yaml_nodes", "shell", "launch", "flags", "containers", "lmcache_config", "images", "hygiene",
    "pods", "engine_kwargs", "dockerfile", "yaml_launches", "installs", "systemd",
}  # fmt: skip
READER_MODULES = sorted(p.stem for p in (PACKAGE / "readers").glob("*.py") if p.stem not in ("__init__", "base"))


def package_imports(text: str, package: tuple[str, ...]) -> set[str]:
    """The package modules a module imports, as names relative to the package (``readers.base``);
    ``package``: the subpackage the module is in (``("readers",)``, or ``()`` at the top)."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.ImportFrom) or node.level == 0 or node.level - 1 > len(package):
            continue  # absolute, or above the package: knowledge, versions, advice.common
        module = [*package[: len(package) - (node.level - 1)], *(node.module.split(".") if node.module else [])]
        if module in ([], ["readers"]):  # `from . import x`, `from .readers import x`: x is a module
            found |= {".".join([*module, alias.name]) for alias in node.names}
        else:
            found.add(".".join(module))
    return found


def imports_of(name: str) -> set[str]:
    path = PACKAGE / (name.replace(".", "/") + ".py")
    return package_imports(path.read_text(encoding="utf-8"), tuple(name.split(".")[:-1]))


def test_readers_import_only_the_shared_modules_and_the_interface() -> None:
    allowed = SHARED | {"readers.base"}
    wrong = {name: sorted(imports_of(f"readers.{name}") - allowed) for name in READER_MODULES}
    assert {name: found for name, found in wrong.items() if found} == {}, (
        "a reader imports a module it should not (another reader, the dispatcher or resolve): move what both "
        "need into a shared module"
    )


def test_shared_modules_do_not_reach_into_readers_or_the_dispatcher() -> None:
    for name in sorted(SHARED | {"readers.base"}):
        imports = imports_of(name)
        assert not {i for i in imports if (i.startswith("readers") and i != "readers.base") or i == "read"}, name


def test_every_reader_module_is_asked_by_the_dispatcher() -> None:
    assert READER_MODULES, "no readers found"
    modules = {type(reader).__module__.rsplit(".", 1)[-1] for reader in read.READERS}
    assert modules == set(READER_MODULES), "a reader module that read.READERS does not list is never asked"


def test_the_import_check_sees_a_reader_importing_another() -> None:
    # The checks above would pass on any file if package_imports found nothing.
    text = "from ..flags import read_args\nfrom .compose import READER\nfrom .. import read\nfrom ...common import x\n"
    assert package_imports(text, ("readers",)) == {"flags", "readers.compose", "read"}
    assert package_imports("from .readers import helm\nfrom .model import Workload\n", ()) == {"readers.helm", "model"}
