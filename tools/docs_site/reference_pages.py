"""The site's generated reference pages: the oracle's API, the divergence registry, the
benchmark results and the repository files that clauses and tests link to.

Each function returns Markdown (or bytes for images) keyed by its path in the docs; the hook
``docs/hooks/kvpool_docs.py`` adds them to the build, so nothing generated is committed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import ModuleType

import tomllib

from tools.docs_site.spec_md import ROOT
from tools.docs_site.spec_pages import code_fence, source_page

BENCHMARKS = ROOT / "benchmarks"


# An ID or a target's name stays on one line (docs/stylesheets/extra.css), not split at a ``-``.
NOWRAP = "{ .nowrap }"


def divergence_page() -> str:
    """The registry ``kvpool.oracle.peers.divergences.REGISTRY``: a table, one row per entry, then
    under each entry's own heading where it comes from and its minimal sequence."""
    from kvpool.oracle.peers.divergences import REGISTRY

    rows = ["| entry | target | clause | rule switched off | what differs |",
            "|---|---|---|---|---|"]
    details = ["## Where each comes from", "",
               "Each entry's source, then its shortest call sequence in the target's own API. "
               "`tests/oracle/test_oracle_divergence_sequences.py` runs every sequence on the "
               "real allocator (`kvpool.oracle.peers.sequences`: `make` builds the target as "
               "the oracle does, `t` is `torch.tensor`); its asserts hold exactly while the "
               "divergence does.", ""]
    for entry in REGISTRY:
        field, value = entry.excludes
        clauses = ", ".join(_clause_link(c) for c in entry.reported_clauses())
        anchor = f"seq-{entry.id.lower()}"
        rows.append(f"| [`{entry.id}`](#{anchor}){NOWRAP} | `{entry.target}`{NOWRAP} | "
                    f"{clauses} | `{field}={value!r}` | {_cell(entry.reason)} |")
        fence = code_fence(entry.sequence)
        details += [f"### {entry.id} {{#{anchor}}}", "",
                    f"**Where it comes from:** {_cell(entry.pointer)}", "",
                    f"{fence}python", entry.sequence, fence, ""]
    intro = (
        "---\nhide:\n  - toc\n---\n\n"  # the table's entries link to their sections
        "# Known divergences\n\n"
        "Real allocators that differ from the specification on purpose or by a known bug. "
        "Each entry names the target, the clause it breaks and the capability value that "
        "switches that rule off for the target; the oracle checks everything else. "
        "The table is generated from `kvpool.oracle.peers.divergences.REGISTRY` when the site is "
        "built; `tests/oracle/test_oracle_peers.py` re-enables each entry and requires the "
        "oracle to report the registered clause. An entry's name leads to where it comes "
        "from and its minimal sequence.\n\n"
    )
    return intro + "\n".join(rows) + "\n\n" + "\n".join(details) + "\n"


# The oracle's public API as ``kvpool.oracle`` exports it; each is documented where it is
# defined, found at build time, so the page follows the package's inner layout.
ORACLE_API = ("conformance_test", "run_config", "load_target", "replay", "replay_file",
              "Capabilities", "KnownDivergence")


def oracle_api_page() -> str:
    """``reference/oracle.md``: the package's docstring, then each public name of
    ``ORACLE_API`` from the module that defines it (mkdocstrings directives)."""
    import kvpool.oracle

    parts = ["# kvpool.oracle", "",
             "The conformance harness's public API, from its docstrings. The command line is "
             "described in [Checking your own allocator](../writing-a-target.md).", "",
             "::: kvpool.oracle", "    options:", "      members: false", ""]
    for name in ORACLE_API:
        obj = getattr(kvpool.oracle, name)
        if isinstance(obj, ModuleType):  # a submodule of the same name shadows the export
            obj = getattr(obj, name)
        parts += [f"::: {obj.__module__}.{name}", ""]
    return "\n".join(parts)


def _clause_link(clause: str) -> str:
    from tools.docs_site.spec_md import load

    owner = load().section_of().get(clause)
    return f"[{clause}](../spec/{owner.page_name}.md#{clause}){NOWRAP}" if owner else clause


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def benchmark_pages() -> dict[str, str | bytes]:
    """``benchmarks/README.md`` as ``benchmarks.md`` with its plots, and the result tables.

    Links into ``results/`` point at the copies under ``benchmarks/``; any other relative
    link becomes plain text naming the repository path (the site holds only these pages).
    """
    pages: dict[str, str | bytes] = {}
    results = BENCHMARKS / "results"
    for plot in sorted(results.glob("*.png")):
        pages[f"benchmarks/{plot.name}"] = plot.read_bytes()
    text = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    pages["benchmarks/index.md"] = _site_links(text, results)
    return pages


_MD_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _site_links(text: str, results: Path) -> str:
    def fix(match: re.Match[str]) -> str:
        bang, label, target = match.groups()
        if target.startswith(("http://", "https://", "#")):
            return match.group(0)
        name = target.rsplit("/", 1)[-1]
        if target.startswith("results/") and (results / name).is_file() and name.endswith(".png"):
            return f"{bang}[{label}]({name})"
        path = (BENCHMARKS / target).resolve()
        try:
            shown = str(path.relative_to(ROOT))
        except ValueError:
            shown = target
        return f"{label} (`{shown}`)" if label.strip("`") != shown else f"`{shown}`"

    return _MD_LINK.sub(fix, text)


def source_pages(paths: list[str]) -> dict[str, str]:
    """One page per repository file (``source/<path>.md``) showing it with line numbers."""
    pages = {}
    for path in sorted(set(paths)):
        code = (ROOT / path).read_text(encoding="utf-8")
        fence = code_fence(code)
        pages[source_page(path)] = (
            "---\nsearch:\n  exclude: true\n---\n\n"  # the clause pages are what to find
            f"# `{path}`\n\n{fence}python linenums=\"1\"\n{code.rstrip()}\n{fence}\n")
    return pages


def package_tree(out: Path) -> Path:
    """``out/kvpool``: the package as the wheel lays it out (``kvpool/spec``, ``kvpool/impl``,
    ...), made of symbolic links to the repository's folders by ``pyproject.toml``'s
    ``package-dir``, so that a static reader (mkdocstrings' griffe) finds every module."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    package = out / "kvpool"
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    for item in (ROOT / mapping["kvpool"]).iterdir():
        if item.suffix in (".py", ".typed"):
            (package / item.name).symlink_to(item)
    for name, folder in mapping.items():
        if name.startswith("kvpool."):
            (package / name.split(".", 1)[1]).symlink_to(ROOT / folder, target_is_directory=True)
    return package


# A Sphinx cross-reference role as mkdocstrings renders it: ``:class:`X``` becomes
# ``:class:<code>X</code>`` (the role is not Markdown, the backticks are).
_SPHINX_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|attr|exc|data|obj|const|ref):<code>(~?)([^<]*)</code>")


def sphinx_roles(html: str) -> str:
    """Sphinx roles left in rendered docstrings (``:class:<code>~a.b.C</code>``) as code spans:
    the role dropped, a ``~`` target shown by its last name (Sphinx's rule), and a link to the
    target's heading when the page documents it (mkdocstrings anchors are full dotted names)."""

    def code(match: re.Match[str]) -> str:
        tilde, target = match.groups()
        shown = target.rsplit(".", 1)[-1] if tilde else target
        span = f"<code>{shown}</code>"
        return f'<a href="#{target}">{span}</a>' if f'id="{target}"' in html else span

    return _SPHINX_ROLE.sub(code, html)
