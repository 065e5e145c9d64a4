"""What the distribution rules (6xx) share: the replica/worker summary of the run (computed once per
evaluation) and the source check of the user's custom training loop (``ast``, never executed).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from tfdoctor.model import DistributedSummary
from tfdoctor.rules._base import REPO, Context

#: the harness's strategy class names that mean one replica on one device
ONE_DEVICE = ("", "_DefaultDistributionStrategy", "DefaultDistributionStrategy", "OneDeviceStrategy")
DISTRIBUTE_CALLS = ("experimental_distribute_dataset", "distribute_datasets_from_function")
MEAN_CALLS = ("reduce_mean",)
SCALED_CALLS = ("compute_average_loss",)


def summary(ctx: Context) -> DistributedSummary | None:
    if "distributed" not in ctx.cache:
        from tfdoctor.analysis.distributed import summary_for

        ctx.cache["distributed"] = summary_for(ctx.analysis, ctx.facts) if ctx.has_steps else None
    return ctx.cache["distributed"]


def multi_replica(ctx: Context) -> bool:
    return ctx.facts.num_replicas > 1 and (ctx.facts.strategy or "") not in ONE_DEVICE


@dataclass
class LoopSource:
    """What the user's script does around ``strategy.run`` (from its syntax tree)."""

    path: Path
    run_calls: list[int] = field(default_factory=list)  # lines of X.run(fn, ...) / experimental_run_v2
    replica_fns: list[str] = field(default_factory=list)  # names of the functions passed to run
    distribute_calls: list[int] = field(default_factory=list)  # lines of the dataset distribution calls
    mean_losses: list[int] = field(default_factory=list)  # reduce_mean inside the replica function(s)
    scaled: bool = False  # compute_average_loss / a division by a global batch in the replica function(s)


def script_path(ctx: Context) -> Path | None:
    """The user's file holding the training step, from the harness's source records ("file.py:LINE")."""
    for role in ("step_fn", "train_step", "gradient_tape", "apply_gradients", "script"):
        loc = ctx.facts.source.get(role)
        if not loc:
            continue
        p = Path(loc.rsplit(":", 1)[0] if loc.rsplit(":", 1)[-1].isdigit() else loc)
        for cand in (p, REPO / p) if not p.is_absolute() else (p,):
            if cand.suffix == ".py" and cand.is_file() and "__autograph_generated" not in cand.name:
                return cand
    return None


def _attr(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def read_loop(path: Path) -> LoopSource | None:
    """Parse ``path``; None when it cannot be read or parsed."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None
    src = LoopSource(path=path)
    defs: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(node.name, node)
        elif isinstance(node, ast.Call):
            name = _attr(node.func)
            if name in DISTRIBUTE_CALLS:
                src.distribute_calls.append(node.lineno)
            elif (
                name in ("run", "experimental_run_v2") and isinstance(node.func, ast.Attribute) and node.args
            ):
                fn = node.args[0]
                if isinstance(fn, (ast.Name, ast.Attribute)):
                    src.run_calls.append(node.lineno)
                    src.replica_fns.append(_attr(fn))
    # the replica functions and the module functions they call (one level: compute_loss helpers)
    todo = [defs[n] for n in src.replica_fns if n in defs]
    seen: set[int] = set()
    for depth in range(2):
        nxt = []
        for fn_def in todo:
            if id(fn_def) in seen:
                continue
            seen.add(id(fn_def))
            for node in ast.walk(fn_def):
                if isinstance(node, ast.Call):
                    name = _attr(node.func)
                    if name in MEAN_CALLS:
                        src.mean_losses.append(node.lineno)
                    elif name in SCALED_CALLS:
                        src.scaled = True
                    elif depth == 0 and name in defs:
                        nxt.append(defs[name])
                elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                    right = ast.unparse(node.right).lower()
                    if "global" in right or "num_replicas_in_sync" in right:
                        src.scaled = True
        todo = nxt
    return src


def loop_source(ctx: Context) -> LoopSource | None:
    if "loop_source" not in ctx.cache:
        path = script_path(ctx)
        ctx.cache["loop_source"] = read_loop(path) if path is not None else None
    return ctx.cache["loop_source"]
