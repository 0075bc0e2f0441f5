"""The docs (docs/, mkdocs.yml) build with no broken link, list every params key, and README's links resolve."""

import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pydantic
from pydantic import AliasChoices, AliasPath, BaseModel

from bench.config.params import Sweep

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _mkdocs_build(project: Path, site: Path) -> subprocess.CompletedProcess:
    """Run ``mkdocs build --strict`` on a project folder into ``site``; return the finished process."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about its successor, not a problem
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_docs_build_strict_with_every_link_and_anchor_valid(tmp_path):
    out = _mkdocs_build(ROOT, tmp_path / "site")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (tmp_path / "site" / "params" / "index.html").is_file()


def test_a_broken_anchor_fails_the_strict_build(tmp_path):
    """The `validation:` section is what makes a dead link an error: a link to a missing heading must fail."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [nothing](params.md#no-such-heading).\n")
    out = _mkdocs_build(tmp_path, tmp_path / "site")
    assert out.returncode != 0
    assert "no-such-heading" in out.stdout + out.stderr


def _models_in(annotation: object) -> list[type[BaseModel]]:
    """Return the pydantic models an annotation holds, through lists, dicts, unions and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _names(field: pydantic.fields.FieldInfo, name: str) -> set[str]:
    """Return every spelling a params file may use for a field: its name and its aliases."""
    names = {name} | ({field.alias} if field.alias else set())
    alias = field.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias] if alias else []
    for choice in choices:
        path = choice.path if isinstance(choice, AliasPath) else [choice]
        names.add(str(path[0]))
    return names


def params_keys(model: type[BaseModel] = Sweep, seen: set | None = None) -> set[str]:
    """Return every key the params file's models accept, recursing into nested models."""
    seen = set() if seen is None else seen
    if model in seen:
        return set()
    seen.add(model)
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        keys |= _names(field, name)
        for nested in _models_in(field.annotation):
            keys |= params_keys(nested, seen)
    return keys


def test_every_params_key_is_in_the_key_reference():
    keys = params_keys()
    assert {"name", "limits", "pilot", "tls_client_key", "batch_discount", "gather_s", "of", "limit"} <= keys
    page = (ROOT / "docs" / "params.md").read_text()
    reference = page.split("\n## Key reference\n", 1)[1]
    missing = sorted(k for k in keys if f"`{k}`" not in reference)
    assert not missing, f"params keys not in docs/params.md's key reference: {missing}"


def _slug(heading: str) -> str:
    """Return GitHub's anchor for a heading (the same as MkDocs' for these docs' headings)."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """Return the anchors of a Markdown file's headings (outside code blocks)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def test_readme_links_resolve():
    readme = re.sub(r"```.*?```|`[^`\n]*`", "", (ROOT / "README.md").read_text(), flags=re.S)
    links = [t for t in LINK.findall(readme) if not re.match(r"[a-z]+:", t)]
    assert len(links) >= 20, links  # the tour points into docs/
    broken = []
    for target in links:
        path, _, anchor = target.partition("#")
        file = (ROOT / path) if path else ROOT / "README.md"
        if not file.exists() or (anchor and anchor not in _anchors(file)):
            broken.append(target)
    assert not broken, f"README.md links to missing files or headings: {broken}"


def test_the_walk_finds_nested_models_through_containers():
    """params_keys must see a model nested in a list, a dict, an optional and Annotated, or keys go unchecked."""

    class Leaf(BaseModel):
        deep: int = 0

    class Top(BaseModel):
        many: list[Leaf] = []
        named: dict[str, typing.Annotated[Leaf | list[int], "x"]] = {}
        maybe: Leaf | None = None
        spelled: int = pydantic.Field(default=0, validation_alias=AliasChoices("spelled", "old_spelling"))

    assert params_keys(Top) == {"many", "named", "maybe", "deep", "spelled", "old_spelling"}
