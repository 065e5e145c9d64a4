"""``batch-scale``: multiply the batch size (×2, ×4, …) and scale the learning rate with it."""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from dataclasses import replace

import libcst as cst
from libcst.codemod import SkipFile
from libcst.metadata import PositionProvider

from tfdoctor.fixes._base import Fix, FixCodemod, FixContext, FixOutcome
from tfdoctor.fixes._cst import (
    aliases,
    assigned_values,
    attr_name,
    call_name,
    dotted,
    kwarg,
    names_read,
    set_kwarg,
    walk,
)

FACTORS = (2, 4, 8)
BATCH_NAME = re.compile(r"^-*(batch[_-]?size|bs|batch)$", re.I)
#: constants that hold a batch size among other words: BATCH_SIZE_PER_REPLICA, per_worker_batch_size
BATCH_CONST = re.compile(r"(^|_)(batch_?size|bs)(_|$)", re.I)
LR_NAME = re.compile(r"^-*(lr|learning[_-]?rate)$", re.I)
#: optimizers whose learning rate scales linearly with the batch (Goyal et al. 2017)
LINEAR = frozenset({"SGD", "Momentum", "MomentumOptimizer", "GradientDescentOptimizer", "LARS"})
#: what the summary says where a learning rate was scaled by the linear rule
LINEAR_RULE = ("linear scaling for", "(linear: optimizer not recognised)")
#: Adam-style (per-parameter adaptive) optimizers: square-root scaling (Hoffer et al. 2017; Malladi et al. 2022)
SQRT = frozenset(
    {
        "Adam",
        "AdamW",
        "Adamax",
        "Nadam",
        "RMSprop",
        "Adagrad",
        "Adadelta",
        "Adafactor",
        "Lion",
        "Ftrl",
        "Lamb",
    }
)


def script_optimizers(tree: cst.Module) -> dict[str, tuple[str, bool]]:
    """Optimizer classes the script defines over a known one (``class GCRMSprop(RMSprop)``, keras-io's
    gradient centralization, copied into many repositories; ``class WarmupAdam(keras.optimizers.Adam)``;
    a subclass of such a class): class name -> (the known optimizer it extends, whether it has an
    ``__init__`` of its own)."""
    classes = {c.name.value: c for c in walk(tree) if isinstance(c, cst.ClassDef)}
    out: dict[str, tuple[str, bool]] = {}
    changed = True
    while changed:  # a subclass of a subclass: until nothing more is found
        changed = False
        for name, cls in classes.items():
            if name in out:
                continue
            for b in cls.bases:
                base = (dotted(b.value) or "").split(".")[-1]
                # a class of the script's (its own __init__ inherited), else a known optimizer
                known, init = out.get(base) or (
                    (base, False) if base in LINEAR or base in SQRT else ("", False)
                )
                if known:
                    own_init = any(
                        isinstance(s, cst.FunctionDef) and s.name.value == "__init__" for s in cls.body.body
                    )
                    out[name] = (known, init or own_init)
                    changed = True
                    break
    return out


def _number(node: cst.BaseExpression) -> float | None:
    if isinstance(node, cst.Integer):
        return float(int(node.value, 0))
    if isinstance(node, cst.Float):
        return float(node.value)
    return None


def _written_number(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """The number to scale in a value: the value itself when it is one, else the one number written in a
    product (``16 * strategy.num_replicas_in_sync`` → ``16``); None (no product, none or several numbers
    in it)."""
    if _number(node) is not None:
        return node
    if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)):
        return None
    numbers = [f for f in _factors(node) if _number(f) is not None]
    return numbers[0] if len(numbers) == 1 else None


def _env_default(node: cst.BaseExpression) -> tuple[cst.BaseExpression, str] | None:
    """A setting read from the environment with a numeric default (``int(os.environ.get("BATCH_SIZE",
    64))``, ``float(os.getenv("LR", "1e-3"))``, as scripts run in containers write it): the default's node
    (a number, or a string of one) and the variable's name."""
    inner = node
    if isinstance(inner, cst.Call) and call_name(inner) in ("int", "float") and len(inner.args) == 1:
        inner = inner.args[0].value
    if not (isinstance(inner, cst.Call) and (call_name(inner) or "").endswith(("environ.get", "getenv"))):
        return None
    positional = [a for a in inner.args if a.keyword is None]
    default = kwarg(inner, "default") or (positional[1] if len(positional) > 1 else None)
    if not positional or not isinstance(var := positional[0].value, cst.SimpleString) or default is None:
        return None
    value = default.value
    if isinstance(value, cst.SimpleString):
        try:
            float(str(value.evaluated_value))
        except ValueError:
            return None
    elif _number(value) is None:
        return None
    return value, str(var.evaluated_value)


def _env_number(node: cst.BaseExpression) -> float | None:
    """The number an environment default (:func:`_env_default`) stands for."""
    if isinstance(node, cst.SimpleString):
        return float(str(node.evaluated_value))
    return _number(node)


#: the first word of a callback's parameter ``<word>_rate`` that is a learning rate (``max_rate``)
_RATE_WORDS = frozenset(
    {"max", "min", "start", "last", "base", "init", "initial", "peak", "final", "target", "end"}
)
#: words that make a parameter a factor or a probability, not a rate (``decay_rate``, ``lr_decay``)
_NOT_RATE = frozenset(
    {"decay", "drop", "dropout", "factor", "gamma", "mult", "multiplier", "patience", "steps"}
)


def _rate_param(name: str) -> bool:
    """A callback parameter named for a learning rate: ``lr``, ``max_lr``, ``learning_rate``,
    ``max_rate``, ``rate``; not ``decay_rate``, ``lr_decay``, ``dropout_rate``."""
    words = name.lower().split("_")
    if not name or _NOT_RATE & set(words):
        return False
    if "lr" in words or "learning" in words or words == ["rate"]:
        return True
    return len(words) == 2 and words[1] == "rate" and words[0] in _RATE_WORDS


def _fmt(value: float, like: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(like, cst.SimpleString):  # an environment variable's default: "64" -> "128"
        text = cst.Module([]).code_for_node(_fmt(value, cst.parse_expression(str(like.evaluated_value))))
        return cst.SimpleString(f"{like.prefix}{like.quote}{text}{like.quote}")
    if isinstance(like, cst.Integer) and value == int(value):
        return cst.Integer(str(int(value)))
    text = f"{value:.6g}"
    if "e" not in text and "." not in text:
        text += ".0"
    return cst.Float(text)


#: the learning-rate note when the script builds no optimizer (it may be in a module beside it)
NO_OPTIMIZER = "not found, not changed"

#: Keras 3 default learning rates (made explicit when scaled)
DEFAULT_LR = {
    "SGD": 0.01,
    "Adam": 0.001,
    "AdamW": 0.001,
    "Adamax": 0.001,
    "Nadam": 0.001,
    "RMSprop": 0.001,
    "Adagrad": 0.001,
    "Adadelta": 0.001,
    "Adafactor": 0.001,
    "Lion": 0.001,
    "Ftrl": 0.001,
    "Lamb": 0.001,
}


def _text(value: float) -> str:
    return cst.Module([]).code_for_node(_fmt(value, cst.Float("0.1")))


#: Keras learning-rate schedules whose first two positional parameters are the initial rate and the
#: steps it decays over (``ExponentialDecay(1e-3, 10000, 0.96)``)
SCHEDULES = frozenset(
    {"ExponentialDecay", "InverseTimeDecay", "CosineDecay", "CosineDecayRestarts", "PolynomialDecay"}
)


#: a LearningRateSchedule of the script's own (TensorFlow's Transformer tutorial's CustomSchedule, with
#: its warm-up counted in steps) is wrapped: run N times as far per step, its rate times the factor
SCALED_SCHEDULE_NAME = "TfdoctorScaledSchedule"
SCALED_SCHEDULE = '''
class {name}({base}):
    """tfdoctor batch-scale: with N times the batch, the schedule runs N times as far per step (the same
    schedule per example seen) and its rate is scaled with the batch (linear for SGD, square root else)."""

    def __init__(self, schedule, steps_factor, rate_factor):
        super().__init__()
        self.schedule = schedule
        self.steps_factor = steps_factor
        self.rate_factor = rate_factor

    def __call__(self, step):
        return self.rate_factor * self.schedule(step * self.steps_factor)

    def get_config(self):
        import keras

        return {{
            "schedule": keras.saving.serialize_keras_object(self.schedule),
            "steps_factor": self.steps_factor,
            "rate_factor": self.rate_factor,
        }}
'''


def _schedule_arg(call: cst.Call, name: str, position: int | None) -> cst.Arg | None:
    """A schedule's argument ``name``: by keyword, or at ``position`` for the :data:`SCHEDULES`."""
    k = kwarg(call, name)
    if k is not None or position is None or (call_name(call) or "").split(".")[-1] not in SCHEDULES:
        return k
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position] if len(positional) > position else None


def _reads_name(e: cst.CSTNode, ref: str) -> bool:
    """Whether ``e`` reads ``ref``: the name itself or an attribute of that name (``args.batch_size``)."""
    return any(
        (isinstance(n, cst.Name) and n.value == ref) or (isinstance(n, cst.Attribute) and n.attr.value == ref)
        for n in walk(e)
    )


def _names_through(e: cst.CSTNode, local: dict[str, list[cst.BaseExpression]], depth: int = 0) -> set[str]:
    """The names ``e`` reads, and those its names were computed from (``lr = BASE_LR * warm``) in
    ``local`` assignments, three levels deep."""
    found = {n.value for n in walk(e) if isinstance(n, cst.Name)}
    if depth < 3:
        for name in list(found):
            for v in local.get(name, []):
                found |= _names_through(v, local, depth + 1)
    return found


def _factors(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What ``expr`` is proportional to: the operands of its top-level products, a quotient's numerator
    (``a * b / c`` → ``a``, ``b``), parentheses looked through."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return _factors(expr.left) + _factors(expr.right)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return _factors(expr.left)
    return [expr]


def _rate_factor(
    fn: cst.FunctionDef | None, expr: cst.BaseExpression
) -> tuple[cst.BaseExpression, str, float] | None:
    """A schedule's rate computed as a number times a decay, as machinelearningmastery's ``step_decay``
    writes it (``initial_lrate = 0.1`` … ``lrate = initial_lrate * math.pow(drop, math.floor((1 + epoch) /
    epochs_drop))``): the number the rate is proportional to, so scaling it scales every epoch's rate.
    (The node to scale, ``"initial_lrate"`` or ``""`` for a number written in the product, its value);
    None when no factor is a number or a local name given one number and used nowhere else in ``fn``
    (``fn`` None, a lambda's body: a number written in it only)."""
    for f in _factors(expr):
        if (v := _number(f)) is not None:
            return f, "", v
        if fn is None or not isinstance(f, cst.Name):
            continue
        sets = [
            a.value
            for a in walk(fn.body)
            if isinstance(a, cst.Assign)
            and any(isinstance(t.target, cst.Name) and t.target.value == f.value for t in a.targets)
        ]
        uses = sum(isinstance(n, cst.Name) and n.value == f.value for n in walk(fn.body))
        if len(sets) == 1 and (v := _number(sets[0])) is not None and uses == 2:  # its assignment, this use
            return sets[0], f.value, v
    return None


def _degree(e: cst.BaseExpression, rates: frozenset[str]) -> int | None:
    """The degree of ``e`` in the names ``rates``: 1 for a rate, 0 for what does not depend on one
    (numbers, the epoch, other names: a local computed from a rate too, so a sum with one then has no
    degree and nothing is scaled), None where ``e`` is not a homogeneous polynomial of them (``LR_MAX +
    1``, a rate in an exponent). A schedule's return of degree 1 scales with its rates:
    ``(LR_MAX - LR_START) / LR_RAMPUP_EPOCHS * epoch + LR_START``."""
    if isinstance(e, cst.Name):
        return 1 if e.value in rates else 0
    if isinstance(e, (cst.Integer, cst.Float, cst.Attribute, cst.Subscript, cst.SimpleString)):
        return 0
    if isinstance(e, cst.UnaryOperation):
        return _degree(e.expression, rates)
    if isinstance(e, cst.IfExp):
        a, b = _degree(e.body, rates), _degree(e.orelse, rates)
        return a if a == b else None
    if isinstance(e, cst.Call):
        if (call_name(e) or "") in ("float", "max", "min") and e.args:  # max(LR_MIN, ...)
            ds = {_degree(a.value, rates) for a in e.args}
            return ds.pop() if len(ds) == 1 else None
        ok = all(_degree(a.value, rates) == 0 for a in e.args)
        return 0 if ok and _degree(e.func, rates) == 0 else None
    if isinstance(e, cst.BinaryOperation):
        a, b = _degree(e.left, rates), _degree(e.right, rates)
        if a is None or b is None:
            return None
        if isinstance(e.operator, (cst.Add, cst.Subtract)):
            return a if a == b else None
        if isinstance(e.operator, cst.Multiply):
            return a + b
        if isinstance(e.operator, cst.Divide):
            return a - b
        return 0 if a == b == 0 else None  # **, //, %: of rate-free values only
    return None


def _factor_text(label: str, v: float, scale: float) -> str:
    """How a :func:`_rate_factor` was scaled: ``initial_lrate × … (initial_lrate 0.1 → 0.2)``, or
    ``0.1 × … → 0.2 × …`` for a number written in the product."""
    return f"{label} × … ({label} {v:g} → {v * scale:.4g})" if label else f"{v:g} × … → {v * scale:.4g} × …"


def _lambda_rates(
    expr: cst.BaseExpression, params: set[str]
) -> list[tuple[cst.BaseExpression, float] | None] | None:
    """What a lambda schedule's body returns, branch by branch (``1e-3 if epoch < 10 else 1e-4``): per
    branch the number to scale (a number, or one written in a product: ``1e-8 * 10 ** (epoch / 20)``),
    or None where it follows the rate it is given (``lr * tf.math.exp(-0.1)``); None when a branch is
    neither (the rate cannot be told to follow)."""
    if isinstance(expr, cst.IfExp):
        body, orelse = _lambda_rates(expr.body, params), _lambda_rates(expr.orelse, params)
        return None if body is None or orelse is None else body + orelse
    if (v := _number(expr)) is not None:
        return [(expr, v)]
    if any(isinstance(n, cst.Name) and n.value in params for n in walk(expr)):
        return [None]
    if (factor := _rate_factor(None, expr)) is not None:
        return [(factor[0], factor[2])]
    return None


def _function_params(tree: cst.Module) -> dict[str, list[cst.Param]]:
    """Parameters with defaults of every function, by name (``def __init__(self, lr=1e-3)``)."""
    out: dict[str, list[cst.Param]] = {}
    for fn in walk(tree):
        if isinstance(fn, cst.FunctionDef):
            for p in (*fn.params.params, *fn.params.kwonly_params):
                if p.default is not None:
                    out.setdefault(p.name.value, []).append(p)
    return out


#: numpy / random / tf.random calls drawing a sample, whose size argument a replay batch is
_SAMPLERS = ("choice", "sample", "randint", "integers", "uniform_candidate_sampler")


def _sampled_batch(tree: cst.Module) -> cst.Call | None:
    """A call drawing the batch at random from a buffer or an array each step: keras-io's DDPG's
    ``np.random.choice(record_range, self.batch_size)``, a DQN's ``random.sample(self.memory, batch_size)``,
    a GAN's ``np.random.randint(0, X_train.shape[0], batch_size)`` (no epoch over the data: the loop's
    updates do not get fewer with a bigger batch)."""
    for c in walk(tree):
        if not isinstance(c, cst.Call) or (call_name(c) or "").split(".")[-1] not in _SAMPLERS:
            continue
        for a in c.args:
            if a.keyword is not None and a.keyword.value not in ("size", "k", "n"):
                continue
            leaf = (
                a.value.attr.value if isinstance(a.value, cst.Attribute) else getattr(a.value, "value", None)
            )
            if isinstance(leaf, str) and (BATCH_NAME.match(leaf) or BATCH_CONST.search(leaf)):
                return c
    return None


def _given_for(tree: cst.Module, param: cst.Param) -> list[tuple[cst.Call, cst.BaseExpression]]:
    """The values the script's calls pass for ``param`` (by keyword or by position) of the function that
    declares it, or of the class whose ``__init__`` it is: keras-io's DDPG builds ``Buffer(50000, 64)``
    for ``def __init__(self, buffer_capacity=100000, batch_size=64)``."""
    for fn in walk(tree):
        if isinstance(fn, cst.FunctionDef) and any(
            p is param for p in (*fn.params.params, *fn.params.kwonly_params)
        ):
            break
    else:
        return []
    callee = fn.name.value
    params = list(fn.params.params)
    if callee == "__init__":
        owner = next(
            (c for c in walk(tree) if isinstance(c, cst.ClassDef) and fn in getattr(c.body, "body", ())), None
        )
        if owner is None:
            return []
        callee = owner.name.value
    if params and params[0].name.value in ("self", "cls") and callee != fn.name.value:
        params = params[1:]
    position = next((i for i, p in enumerate(params) if p is param), None)
    out = []
    for c in walk(tree):
        if not (isinstance(c, cst.Call) and (call_name(c) or "").split(".")[-1] == callee):
            continue
        if any(a.star for a in c.args):
            continue
        found = kwarg(c, param.name.value)
        if found is None and position is not None:
            positional = [a for a in c.args if a.keyword is None]
            found = positional[position] if position < len(positional) else None
        if found is not None:
            out.append((c, found.value))
    return out


def _class_fields(tree: cst.Module) -> dict[str, list[tuple[str, cst.BaseExpression]]]:
    """Fields given a value in a class body, by name: ``(class, value)`` (a config dataclass's
    ``batch_size: int = 64``, a ``class Config: lr = 1e-3``), read as ``cfg.batch_size``; and attributes
    given a value (``config.batch_size = 128`` in an ``ml_collections.ConfigDict``, ``self.lr = 1e-3``),
    ``(the object's name, value)``."""
    out: dict[str, list[tuple[str, cst.BaseExpression]]] = {}
    for a in walk(tree):
        if (
            isinstance(a, cst.Assign)
            and len(a.targets) == 1
            and isinstance(a.targets[0].target, cst.Attribute)
        ):
            t = a.targets[0].target
            out.setdefault(t.attr.value, []).append((dotted(t.value) or "", a.value))
    for cls in walk(tree):
        if not (isinstance(cls, cst.ClassDef) and isinstance(cls.body, cst.IndentedBlock)):
            continue
        for stmt in cls.body.body:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value:
                    out.setdefault(small.target.value, []).append((cls.name.value, small.value))
                elif (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                ):
                    out.setdefault(small.targets[0].target.value, []).append((cls.name.value, small.value))
    return out


#: absl flags: flags.DEFINE_integer("batch_size", 32, "...") read as FLAGS.batch_size
ABSL_DEFINES = frozenset({"DEFINE_integer", "DEFINE_float"})


def _argparse_name(call: cst.Call) -> str | None:
    """The option an argparse ``add_argument`` (``--batch-size``) or an absl ``flags.DEFINE_integer``
    (``batch_size``) defines."""
    if (call_name(call) or "").split(".")[-1] in ABSL_DEFINES:
        first = kwarg(call, "name") or (call.args[0] if call.args and call.args[0].keyword is None else None)
        if first is not None and isinstance(first.value, cst.SimpleString):
            v = first.value.evaluated_value
            return v if isinstance(v, str) else None
        return None
    if attr_name(call) != "add_argument" or not call.args:
        return None
    for a in call.args:
        if a.keyword is None and isinstance(a.value, cst.SimpleString):
            name = a.value.evaluated_value
            if isinstance(name, str) and name.startswith("--"):
                return name
    dest = kwarg(call, "dest")
    if dest is not None and isinstance(dest.value, cst.SimpleString):
        v = dest.value.evaluated_value
        return v if isinstance(v, str) else None
    return None


def _default(call: cst.Call) -> cst.Arg | None:
    """The default of an argparse option or an absl flag (its second positional argument)."""
    d = kwarg(call, "default")
    if d is None and (call_name(call) or "").split(".")[-1] in ABSL_DEFINES:
        pos = [a for a in call.args if a.keyword is None]
        d = pos[1] if len(pos) > 1 else None
    return d


class BatchScaleCodemod(FixCodemod):
    DESCRIPTION = "batch size ×N, learning rate scaled with it"
    METADATA_DEPENDENCIES = (PositionProvider,)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.factor = int(self.fix.params.get("factor", "2"))
        self.module_tree = tree
        self.fields = _class_fields(tree)  # config classes' fields and attributes given a value
        self.edits: dict[int, cst.BaseExpression] = {}  # id(original node) -> new node
        #: the script's functions a LearningRateScheduler runs whose every rate returned was scaled
        self.schedule_fns: set[str] = set()
        # id(a schedule's initial_learning_rate node) -> the schedule's call: its other rates scale too
        self.schedule_of: dict[int, cst.Call] = {}
        self._batch_names: set[str] | None = None  # names computed from the batch size (_batch_dependent)
        self.note_at: int | None = None  # id of the statement that gets the "lr not scaled" comment
        self.wrapper_before: int | None = None  # id of the top statement the schedule wrapper goes before
        self.wrapper_base: str | None = None  # LearningRateSchedule, as the script names it
        self.batch_ref: str | None = None  # the name (or args.<dest>) the batch size was scaled in
        self.fit_batch: set[int] = set()  # id(fit() calls on arrays) that get batch_size= (Keras's 32 scaled)
        args = list(self.fix.script_args)
        if self.fix.params.get("lr_only"):  # a module beside the script: its optimizers only
            lr_desc, unscaled = self._learning_rates(tree, args)
            if not self.edits:
                raise SkipFile(f"no learning rate scaled here ({unscaled or lr_desc})")
            self.summary = f"learning rate {lr_desc}"
            self.examples_factor = float(self.factor)
            return super().transform_module_impl(tree)
        batch_desc = self._batch(tree, args)
        batch_edit = set(self.edits)
        lr_desc, unscaled = self._learning_rates(tree, args)
        self.summary = f"batch size ×{self.factor} ({batch_desc}); learning rate {lr_desc}"
        if unscaled:
            self.summary += " [LEARNING RATE NOT SCALED: see the warning]"
            self.comment = (
                f"# tfdoctor batch-scale: batch ×{self.factor}; learning rate NOT scaled ({unscaled}): "
                "scale it with the batch"
            )
            self.note_at = self._statement_of(tree, batch_edit)
        self.examples_factor = float(self.factor)
        return super().transform_module_impl(tree)

    def _statement_of(self, tree: cst.Module, nodes: set[int]) -> int | None:
        """The simple statement holding the batch-size edit (the unscaled-lr comment goes above it)."""
        for stmt in walk(tree):
            if isinstance(stmt, cst.SimpleStatementLine) and any(id(n) in nodes for n in walk(stmt)):
                return id(stmt)
        return None

    def _batch(self, tree: cst.Module, args: list[str]) -> str:
        for a in args:
            if BATCH_NAME.match(a.split("=")[0]):
                raise SkipFile(f"the batch size is given on the command line ({a}): scale it there")
        if (sampled := _sampled_batch(tree)) is not None:
            raise SkipFile(
                f"the batch is drawn at random each step (line {self.line(sampled)}: "
                f"{cst.Module([]).code_for_node(sampled)}), a replay buffer's or a random batch's: the loop "
                "runs as many updates whatever the batch, so a bigger one makes each update more work, not "
                "the training shorter (examples/s would rise while the script takes longer); the batch size "
                "there is a hyperparameter, left as it is"
            )
        for c in walk(tree):  # argparse --batch-size default
            if isinstance(c, cst.Call) and (name := _argparse_name(c)) and BATCH_NAME.match(name):
                d = _default(c)
                if d is not None and (v := _number(d.value)) is not None:
                    self.edits[id(d.value)] = _fmt(v * self.factor, d.value)
                    self.batch_ref = name.lstrip("-").replace("-", "_")
                    return f"--{name.lstrip('-')} default {v:g} → {v * self.factor:g}, line {self.line(c)}"
        unread: tuple[str, cst.Assign] | None = None  # a batch constant nothing reads: the last resort
        read = names_read(tree)
        for s in walk(tree):  # BATCH_SIZE = 32
            if not (
                isinstance(s, cst.Assign)
                and len(s.targets) == 1
                and isinstance(s.targets[0].target, cst.Name)
            ):
                continue
            name = s.targets[0].target.value
            env = _env_default(s.value)
            if env is not None and (BATCH_NAME.match(name) or BATCH_CONST.search(name)) and name in read:
                env_value, var = env
                if var in os.environ:
                    raise SkipFile(
                        f"the batch size is given in the environment ({var}={os.environ[var]}): scale it there"
                    )
                v = _env_number(env_value)
                assert v is not None
                self.edits[id(env_value)] = _fmt(v * self.factor, env_value)
                self.batch_ref = name
                return f"{name}: ${var}'s default {v:g} → {v * self.factor:g}, line {self.line(s)}"
            # BATCH_SIZE = 32, or a number times the replicas (Kaggle's TPU starters: BATCH_SIZE = 16 *
            # strategy.num_replicas_in_sync): the number written is the one scaled
            number = _written_number(s.value)
            if (BATCH_NAME.match(name) or BATCH_CONST.search(name)) and number is not None:
                v = _number(number)
                assert v is not None
                if name not in read:  # keras-io's distillation sets batch_size = 64, uses none
                    unread = unread or (name, s)
                    continue
                self.edits[id(number)] = _fmt(v * self.factor, number)
                self.batch_ref = name
                if number is not s.value:
                    rest = (
                        cst.Module([])
                        .code_for_node(s.value)
                        .replace(cst.Module([]).code_for_node(number), f"{v * self.factor:g}", 1)
                    )
                    return f"{name} = {rest} (was {v:g} × ...), line {self.line(s)}"
                return f"{s.targets[0].target.value} = {v * self.factor:g}, line {self.line(s)}"
        for dct in walk(tree):  # config = {"batch_size": 32, ...}
            if isinstance(dct, cst.Dict):
                for el in dct.elements:
                    if (
                        isinstance(el, cst.DictElement)
                        and isinstance(el.key, cst.SimpleString)
                        and isinstance(key := el.key.evaluated_value, str)
                        and (BATCH_NAME.match(key) or BATCH_CONST.search(key))
                        and (v := _number(el.value)) is not None
                    ):
                        self.edits[id(el.value)] = _fmt(v * self.factor, el.value)
                        return f"{el.key.value}: {v * self.factor:g}, line {self.line(el)}"
        # read as an attribute (cfg.batch_size) somewhere else than as the target of an assignment
        attrs = Counter(n.attr.value for n in walk(tree) if isinstance(n, cst.Attribute))
        for asg in walk(tree):
            if isinstance(asg, cst.Assign):
                attrs.subtract(
                    t.target.attr.value for t in asg.targets if isinstance(t.target, cst.Attribute)
                )
        for name, fields in self.fields.items():  # @dataclass class Config: batch_size: int = 64
            nums = [f for f in fields if _number(f[1]) is not None]  # (self.batch_size = batch_size: no)
            if (
                (BATCH_NAME.match(name) or BATCH_CONST.search(name))
                and attrs[name] > 0
                and len(nums) == 1
                and (v := _number(nums[0][1])) is not None
            ):
                cls, value = nums[0]
                self.edits[id(value)] = _fmt(v * self.factor, value)
                self.batch_ref = name
                return f"{cls}.{name} = {v * self.factor:g}, line {self.line(value)}"
        # a batch read from a value the script loads at run time (a YAML / JSON config, another module's
        # object): where it is used, said if nothing else is found
        runtime: tuple[cst.Call, cst.BaseExpression] | None = None
        for c in walk(tree):  # .batch(32) / fit(batch_size=32)
            if isinstance(c, cst.Call):
                target = None
                if attr_name(c) == "batch" and c.args and c.args[0].keyword is None:
                    target = c.args[0].value
                elif (k := kwarg(c, "batch_size")) is not None:
                    target = k.value
                if target is not None and (v := _number(target)) is not None:
                    self.edits[id(target)] = _fmt(v * self.factor, target)
                    return f"{v:g} → {v * self.factor:g}, line {self.line(c)}"
                root = target
                while isinstance(root, (cst.Subscript, cst.Attribute)):
                    root = root.value
                # cfg["train"]["batch_size"], config.BATCH_SIZE; not self.batch_size (given where the
                # instance is made) or args.batch_size (the command line's, said above)
                if (
                    runtime is None
                    and target is not None
                    and target is not root
                    and isinstance(root, cst.Name)
                    and root.value not in ("self", "args")
                ):
                    runtime = (c, target)
        for name, ps in _function_params(tree).items():  # def __init__(self, model, batch_size=64)
            default = ps[0].default if len(ps) == 1 else None
            if BATCH_NAME.match(name) and default is not None and (v := _number(default)) is not None:
                given = _given_for(tree, ps[0])
                if given:  # Buffer(50000, 64): the value the script passes, not the default it overrides
                    if any(_number(g) is None for _, g in given):
                        continue  # a name or an expression passed: not this default
                    said = []
                    for call, g in given:
                        gv = _number(g)
                        assert gv is not None
                        self.edits[id(g)] = _fmt(gv * self.factor, g)
                        said.append(f"{name} {gv:g} → {gv * self.factor:g} given at line {self.line(call)}")
                    return "; ".join(said)
                self.edits[id(default)] = _fmt(v * self.factor, default)
                return f"default of parameter {name} {v:g} → {v * self.factor:g}, line {self.line(ps[0])}"
        facts = self.fix.facts
        if facts.loop_kind == "keras_fit" and facts.input_kind == "numpy":
            # fit(x_train, y_train) on arrays batches by Keras's default, 32: made explicit, scaled (a
            # fit on a dataset or PyDataset ignores batch_size; the trial's facts then show no change)
            fits = [
                c
                for c in walk(tree)
                if isinstance(c, cst.Call)
                and attr_name(c) == "fit"
                and isinstance(c.func, cst.Attribute)
                and kwarg(c, "batch_size") is None
                and not any(a.star for a in c.args)
                and (kwarg(c, "x") is not None or any(a.keyword is None for a in c.args))
            ]
            for c in fits:
                self.fit_batch.add(id(c))
            if fits:
                lines = ", ".join(str(self.line(c)) for c in fits)
                return f"fit()'s default 32 made explicit, → {32 * self.factor} (fit at line {lines})"
        if unread is not None and (v := _number(unread[1].value)) is not None:
            name, s = unread
            self.edits[id(s.value)] = _fmt(v * self.factor, s.value)
            self.batch_ref = name
            return f"{name} = {v * self.factor:g}, line {self.line(s)}; nothing in the script reads {name}"
        if runtime is not None:
            c, used = runtime
            raise SkipFile(
                f"the batch size is {cst.Module([]).code_for_node(used)} (line {self.line(c)}), a value the script "
                "reads at run time (a config file, another module): nothing in the script to scale; scale it "
                "where it is set"
            )
        raise SkipFile(
            "no batch size found to scale (argparse --batch-size default, BATCH_SIZE = N, a config dict or "
            "class field, .batch(N), a batch_size=N parameter default, fit() on arrays)"
        )

    def _learning_rates(self, tree: cst.Module, args: list[str]) -> tuple[str, str]:
        """Scale the learning rate of every optimizer; (what was done, what could not be scaled)."""
        al = aliases(tree)
        for a in args:
            if LR_NAME.match(a.split("=")[0]):
                self.warn(
                    f"the learning rate is given on the command line ({a}): scale it with the batch there"
                )
                return "given on the command line, not changed", f"{a} on the command line"
        argparse_lr: dict[str, cst.Call] = {}  # dest -> add_argument call
        for c in walk(tree):
            if isinstance(c, cst.Call) and (name := _argparse_name(c)) and LR_NAME.match(name):
                argparse_lr[name.lstrip("-").replace("-", "_")] = c
        consts: dict[str, list[cst.Assign]] = {}
        for st in tree.body:  # module constants: INIT_LR = 1e-3
            if isinstance(st, cst.SimpleStatementLine):
                for small in st.body:
                    if (
                        isinstance(small, cst.Assign)
                        and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)
                    ):
                        consts.setdefault(small.targets[0].target.value, []).append(small)
        parents = _function_params(tree)
        done: list[str] = []
        missed: list[str] = []
        scaled: set[int] = set()
        opts = self._optimizers(tree)
        # a LearningRateScheduler sets the rate every epoch: its own numbers must scale too (first: an
        # optimizer built from its function, Adam(learning_rate=lr_schedule(0)), follows them)
        sched_done: list[str] = []
        sched_missed: list[str] = []
        self.summed = self._summed_loss(tree)
        if opts and self._scale(opts[0][1]) != 1:
            self._schedulers(tree, self._scale(opts[0][1]), consts, sched_done, sched_missed)
        for call, name, string in opts:
            rule = "linear" if name in LINEAR else "square-root"
            scale = self._scale(name)
            where = f"{self.opt_label.get(id(call), name)} at line {self.line(call)}"
            if scale == 1:  # SGD on a summed loss: the gradient already grows with the batch
                done.append(
                    f"{where}: left as it is (the loss is a sum over the batch, {self.summed}: its gradient "
                    f"grows ×{self.factor} with the batch, which is the linear rule's ×{self.factor} already)"
                )
                continue
            if string is not None:  # compile(optimizer="adam"): the default made explicit
                keras = al.keras or "keras"
                lr = DEFAULT_LR.get(name)
                if lr is None:
                    missed.append(f"{where}: default learning rate unknown")
                    continue
                self.edits[id(string)] = cst.parse_expression(
                    f"{keras}.optimizers.{name}(learning_rate={_text(lr * scale)})"
                )
                done.append(
                    f"{where}: default {lr:g} made explicit, → {lr * scale:.4g} ({rule} scaling for {name})"
                )
                continue
            lr_arg = (
                kwarg(call, "learning_rate")
                or kwarg(call, "lr")
                or (call.args[0] if call.args and call.args[0].keyword is None else None)
            )
            if id(call) in self.own_init and (lr_arg is None or lr_arg.keyword is None):
                # its __init__ may take other arguments first, or set a rate of its own
                missed.append(f"{where}: its own __init__ takes the rate: learning rate not followed")
                continue
            if lr_arg is None:
                lr = DEFAULT_LR.get(name)
                if lr is None:
                    missed.append(f"{where}: no learning rate and no known default")
                    continue
                self.edits[id(call)] = set_kwarg(call, "learning_rate", _fmt(lr * scale, cst.Float("0.1")))
                done.append(
                    f"{where}: default {lr:g} made explicit, → {lr * scale:.4g} ({rule} scaling for {name})"
                )
                continue
            target = self._follow(lr_arg.value, argparse_lr, consts, parents)
            if target is None and (pw := self._piecewise(lr_arg.value, consts)) is not None:
                if id(pw) in scaled:
                    done.append(f"{where}: PiecewiseConstantDecay at line {self.line(pw)} (already scaled)")
                    continue
                scaled.add(id(pw))
                text, miss = self._scale_piecewise(pw, scale)
                if text:
                    done.append(f"{where}: {text} ({rule} scaling for {name})")
                if miss:
                    missed.append(f"{where}: {miss}")
                continue
            if target is None and (sched := self._own_schedule(lr_arg.value, consts)) is not None:
                call, cls = sched  # a LearningRateSchedule subclass of the script's: wrapped
                if id(call) not in self.edits:
                    self.edits[id(call)] = self._wrap_schedule(call, scale)
                done.append(
                    f"{where}: {cls}(...) (line {self.line(call)}) run {self.factor}x as far per step (the same "
                    f"schedule per example), its rate ×{scale:.4g} ({rule} scaling for {name})"
                )
                continue
            if (
                target is None
                and isinstance(called := lr_arg.value, cst.Call)
                and (fn := call_name(called)) in self.schedule_fns
            ):
                text = cst.Module([]).code_for_node(lr_arg.value)  # Adam(learning_rate=lr_schedule(0))
                done.append(f"{where}: learning_rate={text}, from {fn}() scaled ({rule} scaling for {name})")
                continue
            if target is None:
                text = cst.Module([]).code_for_node(lr_arg.value)
                missed.append(f"{where}: learning_rate={text} not followed to a number")
                continue
            node, label = target
            v = _env_number(node)  # a number, or an environment variable's default
            assert v is not None
            if id(node) in scaled:
                done.append(f"{where}: {label} (already scaled)")
                continue
            scaled.add(id(node))
            self.edits[id(node)] = _fmt(v * scale, node)
            others, miss = self._schedule_rates(self.schedule_of.get(id(node)), scale, consts)
            if miss:
                missed.append(f"{where}: {miss}")
            # SGD(learning_rate=0.0), a LearningRateScheduler setting it every epoch: nothing to scale
            change = f"{v:g} → {v * scale:.4g}" if v else "0" if others else "0 left (zero scales to zero)"
            done.append(
                f"{where}: {label + ' ' if label else ''}{change}{others} ({rule} scaling for {name})"
            )
        if not opts and argparse_lr:  # the optimizer is not visible, but the script takes --lr
            name, c = next(iter(argparse_lr.items()))
            d = _default(c)
            if d is not None and (v := _number(d.value)) is not None:
                scale = self.factor
                self.edits[id(d.value)] = _fmt(v * scale, d.value)
                self.warn("optimizer not recognised: learning rate scaled linearly (the SGD rule)")
                return f"--{name} default {v:g} → {v * scale:.4g} (linear: optimizer not recognised)", ""
        if not opts and (elsewhere := self.fix.params.get("lr_elsewhere")):
            return f"scaled in {elsewhere}, where the optimizer is built", ""
        if not opts:
            self.warn(
                f"no optimizer or learning rate found: scale the learning rate ×{self.factor} (SGD) or ×√{self.factor} (Adam) yourself"
            )
            return NO_OPTIMIZER, "no optimizer found"
        done += sched_done
        missed += sched_missed
        scaled_names = self._scaled_names(consts) - {self.batch_ref or ""}  # rates, not the batch
        for where, text, names in self._rates_set_in_loops(tree):
            who, at = where.split(" at ", 1)
            via = sorted(names & scaled_names)
            if not via and "." in who and (built := self._callback_rates(tree, who.split(".")[0], opts)):
                done.append(f"{who} sets the rate itself at {at} ({text}) from {built}")
                self.warn(
                    f"{who} sets the learning rate itself at {at} ({text}): a warm-up or decay it counts in "
                    f"steps now runs {self.factor}x slower per example: divide those step counts by {self.factor} "
                    "(where they are computed from the batch size, they already are)"
                )
                continue
            if not via:
                missed.append(
                    f"{who} sets the rate itself at {at} ({text}), from no rate scaled here: it replaces the "
                    "scaled one"
                )
                continue
            done.append(
                f"{who} sets the rate itself at {at} ({text}) from {', '.join(via)}, scaled: step counts in "
                f"its schedule, if any, are not divided by {self.factor}"
            )
            self.warn(
                f"{who} sets the learning rate itself at {at} ({text}): a warm-up or decay it counts in steps "
                f"now runs {self.factor}x slower per example: divide those step counts by {self.factor}"
            )
        for m in missed:
            self.warn(f"learning rate not scaled: {m}")
        text = "; ".join(done) if done else "not changed"
        return text, "; ".join(missed)

    def _scale(self, optimizer: str) -> float:
        """The learning rate's factor for the batch's: linear for SGD-style optimizers, square root else;
        1 for an SGD-style optimizer when the loss is a sum over the batch (:meth:`_summed_loss`): its
        gradient, so SGD's step, grows with the batch by itself. An Adam-style step does not depend on the
        gradient's scale: square root, summed or not."""
        if optimizer in LINEAR:
            return 1.0 if getattr(self, "summed", None) else float(self.factor)
        return math.sqrt(self.factor)

    def _summed_loss(self, tree: cst.Module) -> str | None:
        """Where the training loss is a sum over the batch, not a mean: a Keras loss built with
        ``reduction="sum"`` (``Reduction.SUM``), or a ``reduce_sum`` / ``ops.sum`` that a ``compute_loss``
        returns or a ``tape.gradient`` differentiates (followed through a name assigned in the same
        function; ``reduce_sum(...) / batch`` is a mean). None when no such sum is seen."""
        for c in walk(tree):
            if not isinstance(c, cst.Call):
                continue
            r = kwarg(c, "reduction")
            if r is not None and (
                (isinstance(r.value, cst.SimpleString) and str(r.value.evaluated_value).lower() == "sum")
                or (isinstance(r.value, cst.Attribute) and r.value.attr.value == "SUM")
            ):
                return f"reduction={cst.Module([]).code_for_node(r.value)} at line {self.line(c)}"
        for fn in walk(tree):
            if not isinstance(fn, cst.FunctionDef):
                continue
            assigned: dict[str, cst.BaseExpression] = {}
            targets: list[cst.BaseExpression] = []
            for n in walk(fn.body):
                if (
                    isinstance(n, cst.Assign)
                    and len(n.targets) == 1
                    and isinstance(n.targets[0].target, cst.Name)
                ):
                    assigned[n.targets[0].target.value] = n.value
                elif isinstance(n, cst.Call) and attr_name(n) == "gradient" and n.args:
                    targets.append(n.args[0].value)
                elif isinstance(n, cst.Return) and n.value is not None and fn.name.value == "compute_loss":
                    targets.append(n.value)
            for t in targets:
                if isinstance(t, cst.Name) and t.value in assigned:
                    t = assigned[t.value]
                name = call_name(t) if isinstance(t, cst.Call) else None
                if name and (name.endswith("reduce_sum") or name.endswith(".sum")):  # not Python's sum()
                    return f"{name}(...) at line {self.line(t)}"
        return None

    def _schedulers(
        self,
        tree: cst.Module,
        scale: float,
        consts: dict[str, list[cst.Assign]],
        done: list[str],
        missed: list[str],
    ) -> None:
        """``keras.callbacks.LearningRateScheduler(decay)``: the rate ``decay(epoch[, lr])`` returns replaces
        the optimizer's every epoch (TensorFlow's distributed-training tutorial returns 1e-3, 1e-4, 1e-5).
        Its numbers returned are scaled; a rate computed from the ``lr`` it is given follows the scaled
        one; anything else cannot be told, and says so."""
        defs = {f.name.value: f for f in walk(tree) if isinstance(f, cst.FunctionDef)}
        for c in walk(tree):
            if not (
                isinstance(c, cst.Call) and (call_name(c) or "").split(".")[-1] == "LearningRateScheduler"
            ):
                continue
            arg = kwarg(c, "schedule") or (c.args[0] if c.args and c.args[0].keyword is None else None)
            where = f"LearningRateScheduler at line {self.line(c)}"
            fn = defs.get(arg.value.value) if arg is not None and isinstance(arg.value, cst.Name) else None
            lam = arg.value if arg is not None and isinstance(arg.value, cst.Lambda) else None
            if fn is None and arg is not None and isinstance(arg.value, cst.Name):
                bound = [
                    v for v in assigned_values(tree).get(arg.value.value, []) if isinstance(v, cst.Lambda)
                ]
                lam = bound[0] if len(bound) == 1 else None  # scheduler = lambda epoch: ...
            if lam is not None:  # LearningRateScheduler(lambda epoch: 1e-8 * 10 ** (epoch / 20))
                rates = _lambda_rates(lam.body, {p.name.value for p in lam.params.params[1:2]})
                if rates is None:
                    missed.append(f"{where}: its lambda returns a rate not computed from the one it is given")
                    continue
                texts = []
                for got in rates:
                    if got is None:
                        texts.append("the rate it is given, which follows")
                        continue
                    node, number = got
                    self.edits[id(node)] = _fmt(number * scale, node)
                    texts.append(f"{number:g} → {number * scale:.4g}")
                done.append(f"{where}: its lambda returns {', '.join(dict.fromkeys(texts))}")
                continue
            if fn is None:
                missed.append(
                    f"{where}: its schedule is not a function of the script, and it sets the rate every epoch"
                )
                continue
            params = {p.name.value for p in fn.params.params[1:2]}  # (epoch, lr): the current rate
            scaled: list[str] = []
            opaque = False
            before = set(self.edits)  # an opaque return undoes the others' edits: nothing scaled halfway
            for r in walk(fn.body):
                if not isinstance(r, cst.Return) or r.value is None:
                    continue
                v = _number(r.value)
                if v is not None:
                    self.edits[id(r.value)] = _fmt(v * scale, r.value)
                    scaled.append(f"{v:g} → {v * scale:.4g}")
                elif isinstance(r.value, cst.Name) and r.value.value not in params:
                    local = self._local_rate(fn, r.value.value, params, scale)
                    opaque = opaque or local is None
                    scaled += [f"{r.value.value} = {t}" for t in local or []]
                elif any(isinstance(n, cst.Name) and n.value in params for n in walk(r.value)):
                    pass
                elif (factor := _rate_factor(fn, r.value)) is not None:
                    node, label, v = factor  # return 0.1 * 0.5 ** (epoch // 10)
                    self.edits[id(node)] = _fmt(v * scale, node)
                    scaled.append(_factor_text(label, v, scale))
                else:
                    opaque = True
            if opaque:
                for k in set(self.edits) - before:
                    del self.edits[k]
                scaled = self._constant_rates(tree, fn, params, scale, consts)
                if not scaled:
                    missed.append(
                        f"{where}: {fn.name.value}() returns a rate not computed from the one it is given"
                    )
            elif scaled:
                self.schedule_fns.add(fn.name.value)
            if scaled:
                done.append(f"{where}: {fn.name.value}() returns {', '.join(dict.fromkeys(scaled))}")

    def _constant_rates(
        self,
        tree: cst.Module,
        fn: cst.FunctionDef,
        params: set[str],
        scale: float,
        consts: dict[str, list[cst.Assign]],
    ) -> list[str]:
        """A schedule computing its rate from the module's constants, as Kaggle's TPU starters write
        ``lrfn(epoch)`` (``LR_START``, ``LR_MAX = 0.00005 * strategy.num_replicas_in_sync``, ``LR_MIN``, a
        ramp-up and an exponential decay): the one set of those constants in which every rate it returns
        (a local name followed to its assignments) is of degree 1 (:func:`_degree`) is scaled, each
        constant's number (``consts``: the module's, as :meth:`_learning_rates` reads them); [] (nothing
        edited) where no such set, or more than one, exists."""
        once = Counter(
            t.target.value
            for a in walk(tree)
            if isinstance(a, cst.Assign)
            for t in a.targets
            if isinstance(t.target, cst.Name)
        )
        local = assigned_values(fn.body)
        returned: list[cst.BaseExpression] = []
        for r in walk(fn.body):
            if isinstance(r, cst.Return) and r.value is not None:
                if isinstance(r.value, cst.Name) and r.value.value in local:
                    returned += local[r.value.value]
                else:
                    returned.append(r.value)
        if not returned or any(
            isinstance(n, cst.AugAssign)
            and not isinstance(n.operator, (cst.MultiplyAssign, cst.DivideAssign))
            for n in walk(fn.body)
        ):
            return []
        numbers: dict[str, cst.BaseExpression] = {}  # a constant read in the rates -> its number's node
        for n in (m for v in returned for m in walk(v)):
            if (
                isinstance(n, cst.Name)
                and n.value not in local
                and n.value not in params
                and once[n.value] == 1
                and len(defs := consts.get(n.value, [])) == 1
                and (num := _written_number(defs[0].value)) is not None
            ):
                numbers[n.value] = num
        names = sorted(numbers)
        if not names or len(names) > 10:
            return []
        found = [
            rates
            for k in range(1, 1 << len(names))
            if all(
                _degree(v, rates := frozenset(n for i, n in enumerate(names) if k >> i & 1)) == 1
                for v in returned
            )
        ]
        if len(found) != 1:
            return []
        scaled = []
        for name in (n for n in numbers if n in found[0]):  # in the order the function reads them
            node = numbers[name]
            v = _number(node)
            assert v is not None
            self.edits[id(node)] = _fmt(v * scale, node)
            scaled.append(f"{name} {v:g} → {v * scale:.4g}")
        return [
            f"a rate computed from {', '.join(n for n in numbers if n in found[0])} ({'; '.join(scaled)})"
        ]

    def _local_rate(self, fn: cst.FunctionDef, name: str, params: set[str], scale: float) -> list[str] | None:
        """A schedule that returns a name of its own, as Keras's ``cifar10_resnet.py`` writes it
        (``lr = 1e-3``, then ``lr *= 1e-1`` past epoch 80, ``return lr``): its numbers assigned are
        scaled (what they are multiplied or divided by then follows); None when an assignment to it
        is neither a number nor computed from itself or the given rate (``lr += 1e-4``, ``lr = BASE``:
        the rate returned cannot be told to follow)."""
        scaled: list[str] = []
        edits: dict[int, cst.BaseExpression] = {}  # made only when every assignment follows
        for n in walk(fn.body):
            if isinstance(n, cst.AugAssign) and isinstance(n.target, cst.Name) and n.target.value == name:
                if not isinstance(n.operator, (cst.MultiplyAssign, cst.DivideAssign)):
                    return None
            elif isinstance(n, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == name for t in n.targets
            ):
                v = _number(n.value)
                if v is not None:
                    edits[id(n.value)] = _fmt(v * scale, n.value)
                    scaled.append(f"{v:g} → {v * scale:.4g}")
                elif any(isinstance(m, cst.Name) and m.value in params | {name} for m in walk(n.value)):
                    continue
                elif (factor := _rate_factor(fn, n.value)) is not None:
                    node, label, v = factor  # lrate = initial_lrate * math.pow(drop, ...)
                    edits[id(node)] = _fmt(v * scale, node)
                    scaled.append(_factor_text(label, v, scale))
                else:
                    return None
        self.edits.update(edits)
        return scaled or None

    def _scaled_names(self, consts: dict[str, list[cst.Assign]]) -> set[str]:
        """Module names whose one assignment is a number this fix scaled (``BASE_LR = 1e-3``)."""
        return {name for name, defs in consts.items() if len(defs) == 1 and id(defs[0].value) in self.edits}

    def _callback_rates(
        self, tree: cst.Module, cls: str, opts: list[tuple[cst.Call, str, cst.SimpleString | None]]
    ) -> str:
        """Scale the rates a callback class that sets the optimizer's rate itself is built with
        (ageron's ``OneCycleScheduler(iterations, max_rate=0.05)``: its start and last rates are
        fractions of ``max_rate``): each number given at ``cls(...)`` for a parameter named like a rate
        (``*rate*``, ``*lr*``), by keyword or by position in its ``__init__``. What was done, or "" where
        nothing was (no such number, or optimizers of different scaling rules)."""
        rules = {"linear" if name in LINEAR else "square-root" for _, name, _ in opts}
        if len(rules) != 1:
            return ""
        rule = rules.pop()
        scale = self._scale(opts[0][1])
        params: list[str] = []
        for c in walk(tree):
            if isinstance(c, cst.ClassDef) and c.name.value == cls:
                for fn in c.body.body:
                    if isinstance(fn, cst.FunctionDef) and fn.name.value == "__init__":
                        params = [p.name.value for p in fn.params.params][1:]  # less self
        changes: list[str] = []
        for c in walk(tree):
            if not (isinstance(c, cst.Call) and call_name(c) == cls):
                continue
            for i, a in enumerate(c.args):
                name = a.keyword.value if a.keyword is not None else (params[i] if i < len(params) else "")
                v = _number(a.value)
                if not _rate_param(name) or v is None or id(a.value) in self.edits:
                    continue
                self.edits[id(a.value)] = _fmt(v * scale, a.value)
                changes.append(f"{name}={v:g} → {v * scale:.4g} (line {self.line(c)})")
        if not changes:
            return ""
        return f"{cls}(...)'s {', '.join(changes)}, scaled ({rule} scaling)"

    def _rates_set_in_loops(self, tree: cst.Module) -> list[tuple[str, str, set[str]]]:
        """Where a loop, or a callback's ``on_*`` method, sets the optimizer's rate by hand
        (``optimizer.learning_rate = lr``, ``optimizer.lr.assign(lr)``, ``K.set_value(optimizer.lr, lr)``):
        (``line N`` with who, the statement, the names the rate is computed from: through the scope's own
        ``lr = ...`` assignments, and for a callback the arguments its class is built with)."""
        out: list[tuple[str, str, set[str]]] = []
        rate_attrs = ("learning_rate", "lr")
        scopes: list[tuple[cst.CSTNode, str, set[str]]] = []
        for node in walk(tree):
            if isinstance(node, (cst.For, cst.While)):
                scopes.append((node.body, "the loop", set()))
            elif isinstance(node, cst.ClassDef) and any(
                isinstance(fn, cst.FunctionDef) and fn.name.value.startswith("on_") for fn in node.body.body
            ):
                built = {  # WarmUp(target=LR), and the defaults of its __init__
                    n.value
                    for c in walk(tree)
                    if isinstance(c, cst.Call) and call_name(c) == node.name.value
                    for a in c.args
                    for n in walk(a.value)
                    if isinstance(n, cst.Name)
                }
                for fn in node.body.body:
                    if isinstance(fn, cst.FunctionDef) and fn.name.value == "__init__":
                        built |= {
                            n.value
                            for p in fn.params.params
                            if p.default
                            for n in walk(p.default)
                            if isinstance(n, cst.Name)
                        }
                for fn in node.body.body:
                    if isinstance(fn, cst.FunctionDef) and fn.name.value.startswith("on_"):
                        scopes.append((fn.body, f"{node.name.value}.{fn.name.value}()", built))
        for body, who, extra in scopes:
            local = assigned_values(body)
            for n in walk(body):
                hit: cst.Assign | cst.Call | None = None
                if isinstance(n, cst.Assign) and any(
                    isinstance(t.target, cst.Attribute) and t.target.attr.value in rate_attrs
                    for t in n.targets
                ):
                    hit = n
                elif isinstance(n, cst.Call):
                    name = call_name(n) or ""
                    first = n.args[0].value if n.args else None
                    if (name.endswith(".assign") and isinstance(n.func, cst.Attribute)) and isinstance(
                        n.func.value, cst.Attribute
                    ):
                        hit = n if n.func.value.attr.value in rate_attrs else None
                    elif name.split(".")[-1] == "set_value" and isinstance(first, cst.Attribute):
                        hit = n if first.attr.value in rate_attrs else None
                where = f"line {self.line(hit)}" if hit is not None else ""
                if hit is not None and not any(o[0].endswith(where) for o in out):
                    value = hit.value if isinstance(hit, cst.Assign) else hit.args[-1].value
                    out.append(
                        (
                            f"{who} at {where}",
                            cst.Module([]).code_for_node(hit).strip(),
                            _names_through(value, local) | extra,
                        )
                    )
        return out

    def _dict_entry(self, name: str, key: object) -> cst.BaseExpression | None:
        """The value of ``key`` in the one dict literal (or ``dict(...)`` call) assigned to ``name``; for a
        name no dict is assigned to (a function's ``config`` parameter, given ``CONFIG`` by the caller),
        the value of ``key`` in the one dict literal of the script that has it."""
        found = self._dict_entries(name, key)
        if not found and not any(
            isinstance(a, cst.Assign)
            and any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)
            for a in walk(self.module_tree)
        ):
            found = [
                el.value
                for d in walk(self.module_tree)
                if isinstance(d, cst.Dict)
                for el in d.elements
                if isinstance(el, cst.DictElement)
                and isinstance(el.key, cst.SimpleString)
                and el.key.evaluated_value == key
            ]
        return found[0] if len(found) == 1 else None

    def _dict_entries(self, name: str, key: object) -> list[cst.BaseExpression]:
        found: list[cst.BaseExpression] = []
        for a in walk(self.module_tree):
            if not (
                isinstance(a, cst.Assign)
                and len(a.targets) == 1
                and isinstance(a.targets[0].target, cst.Name)
                and a.targets[0].target.value == name
            ):
                continue
            if isinstance(a.value, cst.Dict):
                for el in a.value.elements:
                    if (
                        isinstance(el, cst.DictElement)
                        and isinstance(el.key, cst.SimpleString)
                        and el.key.evaluated_value == key
                    ):
                        found.append(el.value)
            elif isinstance(a.value, cst.Call) and call_name(a.value) == "dict" and isinstance(key, str):
                k = kwarg(a.value, key)
                if k is not None:
                    found.append(k.value)
        return found

    def _optimizers(self, tree: cst.Module) -> list[tuple[cst.Call, str, cst.SimpleString | None]]:
        """Every optimizer the script builds: (constructor call or compile call, class, the string). An
        optimizer class of the script's own (keras-io's ``class GCRMSprop(RMSprop)``) counts as the
        optimizer it extends: its class is that base's (the scaling rule, the default rate), and
        :attr:`opt_label` names it for the summary."""
        out: list[tuple[cst.Call, str, cst.SimpleString | None]] = []
        own = script_optimizers(tree)
        self.opt_label: dict[int, str] = {}
        self.own_init: set[int] = set()  # subclasses with an __init__ of their own: keyword rates only
        for c in walk(tree):
            if not isinstance(c, cst.Call):
                continue
            last = (call_name(c) or "").split(".")[-1]
            if last in LINEAR or last in SQRT:
                out.append((c, last, None))
            elif last in own:
                base, init = own[last]
                out.append((c, base, None))
                self.opt_label[id(c)] = f"{last} (a subclass of {base})"
                if init:
                    self.own_init.add(id(c))
            elif attr_name(c) == "compile":
                opt = kwarg(c, "optimizer") or (c.args[0] if c.args and c.args[0].keyword is None else None)
                if opt is not None and isinstance(opt.value, cst.SimpleString):
                    v = opt.value.evaluated_value
                    for o in (*LINEAR, *SQRT):
                        if isinstance(v, str) and v.lower() == o.lower():
                            out.append((c, o, opt.value))
        return out

    def _follow(
        self,
        value: cst.BaseExpression,
        argparse_lr: dict[str, cst.Call],
        consts: dict[str, list[cst.Assign]],
        params: dict[str, list[cst.Param]],
    ) -> tuple[cst.BaseExpression, str] | None:
        """A learning-rate expression followed to the number to scale, with where it is."""
        if _number(value) is not None:
            return value, ""
        if isinstance(value, cst.Attribute) and value.attr.value in argparse_lr:  # args.lr
            c = argparse_lr[value.attr.value]
            d = _default(c)
            if d is not None and _number(d.value) is not None:
                return d.value, f"--{value.attr.value} default (line {self.line(c)})"
            return None
        if isinstance(value, cst.Attribute):  # cfg.learning_rate: a config class's field
            fields = [f for f in self.fields.get(value.attr.value, []) if _number(f[1]) is not None]
            if len(fields) == 1:
                cls, field_value = fields[0]
                return field_value, f"{cls}.{value.attr.value} (line {self.line(field_value)})"
        if isinstance(value, cst.Name):
            defs = consts.get(value.value, [])
            if len(defs) == 1 and _number(defs[0].value) is not None:
                return defs[0].value, f"{value.value} (line {self.line(defs[0])})"
            if (
                len(defs) == 1
                and (env := _env_default(defs[0].value)) is not None
                and env[1] not in os.environ
            ):
                return env[0], f"{value.value}: ${env[1]}'s default (line {self.line(defs[0])})"
            ps = params.get(value.value, [])
            if len(ps) == 1 and ps[0].default is not None and _number(ps[0].default) is not None:
                return ps[0].default, f"default of parameter {value.value} (line {self.line(ps[0])})"
            if len(defs) == 1 and isinstance(defs[0].value, cst.Call):  # a schedule: initial_learning_rate
                init = _schedule_arg(defs[0].value, "initial_learning_rate", 0)
                if init is not None and _number(init.value) is not None:
                    self.schedule_of[id(init.value)] = defs[0].value
                    steps = self._schedule_steps(defs[0].value)
                    return (
                        init.value,
                        f"{value.value}'s initial_learning_rate (line {self.line(defs[0])}){steps}",
                    )
        if (
            isinstance(value, cst.Subscript)
            and isinstance(value.value, cst.Name)
            and len(value.slice) == 1
            and isinstance(value.slice[0].slice, cst.Index)
            and isinstance(key := value.slice[0].slice.value, cst.SimpleString)
        ):  # config["lr"], config = {"lr": 1e-3, ...} or dict(lr=1e-3, ...)
            found = self._dict_entry(value.value.value, key.evaluated_value)
            if found is not None and _number(found) is not None:
                return found, f"{value.value.value}[{key.value}] (line {self.line(found)})"
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Multiply, cst.Divide)):
            # LEARNING_RATE * 10: scaling the constant scales the product
            for side, other in ((value.left, value.right), (value.right, value.left)):
                if _number(other) is not None and _number(side) is None:
                    return self._follow(side, argparse_lr, consts, params)
        if isinstance(value, cst.Call):
            init = _schedule_arg(value, "initial_learning_rate", 0)
            if init is not None and _number(init.value) is not None:
                self.schedule_of[id(init.value)] = value
                return (
                    init.value,
                    f"initial_learning_rate (line {self.line(value)}){self._schedule_steps(value)}",
                )
        return None

    def _piecewise(self, value: cst.BaseExpression, consts: dict[str, list[cst.Assign]]) -> cst.Call | None:
        """``value`` (or the one module assignment of the name it is) as a ``PiecewiseConstantDecay`` call."""
        if isinstance(value, cst.Name):
            defs = consts.get(value.value, [])
            if len(defs) != 1:
                return None
            value = defs[0].value
        if (
            isinstance(value, cst.Call)
            and (call_name(value) or "").split(".")[-1] == "PiecewiseConstantDecay"
        ):
            return value
        return None

    def _scale_piecewise(self, call: cst.Call, scale: float) -> tuple[str, str]:
        """``PiecewiseConstantDecay(boundaries, values)``: every rate in ``values`` scaled, every step in
        ``boundaries`` divided by the factor (the same schedule per example; a boundary computed from the
        batch, ``steps_per_epoch * 30``, already follows it). (What was changed, what could not be.)"""
        where = f"PiecewiseConstantDecay at line {self.line(call)}"
        positional = [a for a in call.args if a.keyword is None and not a.star]
        values = kwarg(call, "values") or (positional[1] if len(positional) > 1 else None)
        bounds = kwarg(call, "boundaries") or (positional[0] if positional else None)
        if values is None or not isinstance(values.value, (cst.List, cst.Tuple)):
            return "", f"{where}: its values are not a list of numbers"
        rates = [el.value for el in values.value.elements]
        nums = [_number(r) for r in rates]
        if any(v is None for v in nums):
            return "", f"{where}: its values are not all numbers"
        for r, v in zip(rates, nums, strict=True):
            assert v is not None
            self.edits[id(r)] = _fmt(v * scale, r)
        text = f"{where}: values {', '.join(f'{v:g}' for v in nums if v is not None)} ×{scale:.4g}"
        if bounds is None or not isinstance(bounds.value, (cst.List, cst.Tuple)):
            self.warn(f"{where}: its boundaries count steps: divide them by {self.factor} with the batch")
            return text, ""
        moved, follows, opaque = [], [], []
        for el in bounds.value.elements:
            b = el.value
            if (v := _number(b)) is not None:
                new = max(1, round(v / self.factor))
                self.edits[id(b)] = cst.Integer(str(new))
                moved.append(f"{v:g} → {new}")
            elif (via := self._batch_dependent(b)) is not None:
                follows.append(via)
            else:
                opaque.append(cst.Module([]).code_for_node(b))
        if moved:
            text += f", boundaries {', '.join(moved)} (the same schedule per example)"
        if follows:
            text += f", boundaries follow the batch size through {', '.join(sorted(set(follows)))}"
        if opaque:  # as a schedule's decay_steps: said, not guessed
            listed = ", ".join(opaque)
            text += f", boundaries {listed} NOT divided by {self.factor}: the rate steps down {self.factor}x later per example"
            self.warn(
                f"{where}: boundaries {listed} count steps: divide them by {self.factor} with the batch"
            )
        return text, ""

    def _own_schedule(
        self, value: cst.BaseExpression, consts: dict[str, list[cst.Assign]]
    ) -> tuple[cst.Call, str] | None:
        """``value`` (or the one module assignment of the name it is) as a call of a class the script
        defines from a ``LearningRateSchedule`` (TensorFlow's Transformer tutorial's ``CustomSchedule``),
        with the class's name."""
        if isinstance(value, cst.Name):
            defs = consts.get(value.value, [])
            if len(defs) != 1:
                return None
            value = defs[0].value
        if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
            return None
        for c in walk(self.module_tree):
            if not (isinstance(c, cst.ClassDef) and c.name.value == value.func.value):
                continue
            for b in c.bases:
                base = dotted(b.value) or ""
                if base.endswith("LearningRateSchedule"):
                    self.wrapper_base = self.wrapper_base or base  # as the script names it
                    return value, c.name.value
        return None

    def _wrap_schedule(self, call: cst.Call, scale: float) -> cst.Call:
        """``call`` wrapped in the class :data:`SCALED_SCHEDULE` defines (inserted before the first
        top-level statement that uses it)."""
        self.wrapper_before = self.wrapper_before or self._top_statement_of(call)
        return cst.Call(
            func=cst.Name(SCALED_SCHEDULE_NAME),
            args=[
                cst.Arg(call),
                cst.Arg(cst.Integer(str(self.factor))),
                cst.Arg(
                    _fmt(scale, cst.Float("0.1")) if scale != int(scale) else cst.Integer(str(int(scale)))
                ),
            ],
        )

    def _top_statement_of(self, node: cst.CSTNode) -> int | None:
        for stmt in self.module_tree.body:
            if any(n is node for n in walk(stmt)):
                return id(stmt)
        return None

    def _schedule_rates(
        self, call: cst.Call | None, scale: float, consts: dict[str, list[cst.Assign]]
    ) -> tuple[str, str]:
        """A schedule's rates besides its initial one scale with it: Keras 3 ``CosineDecay``'s
        ``warmup_target`` (the peak a warm-up from ``initial_learning_rate=0.0`` climbs to: the rate that
        matters), ``PolynomialDecay``'s ``end_learning_rate``; a name is followed to its one module
        assignment. (What was changed, as text for the summary; what could not be.)"""
        if call is None:
            return "", ""
        notes, missed = [], []
        poly = (call_name(call) or "").split(".")[-1] == "PolynomialDecay"
        for name, position in (("warmup_target", None), ("end_learning_rate", 2 if poly else None)):
            k = _schedule_arg(call, name, position)
            if k is None:
                continue
            node, label = k.value, name
            if isinstance(node, cst.Name) and len(defs := consts.get(node.value, [])) == 1:
                label = f"{name}={node.value} (line {self.line(defs[0])})"
                node = defs[0].value
            if id(node) in self.edits:
                continue
            if (v := _number(node)) is not None:
                self.edits[id(node)] = _fmt(v * scale, node)
                notes.append(f"{label} {v:g} → {v * scale:.4g}")
            else:
                text = cst.Module([]).code_for_node(k.value)
                missed.append(
                    f"{name}={text} of the schedule at line {self.line(call)} not followed to a number"
                )
        return (f", {', '.join(notes)}" if notes else ""), "; ".join(missed)

    def _schedule_steps(self, call: cst.Call) -> str:
        """A schedule counts optimizer steps (``decay_steps=10000``): with N times the batch an epoch has
        N times fewer, so its step counts are divided by N (the rate then moves with the examples seen,
        as before). What was changed, as text for the summary."""
        notes = []
        for name in ("decay_steps", "first_decay_steps", "warmup_steps"):
            k = _schedule_arg(call, name, 1 if name != "warmup_steps" else None)
            if k is None or id(k.value) in self.edits:
                continue
            if (v := _number(k.value)) is not None:
                new = max(1, round(v / self.factor))
                self.edits[id(k.value)] = cst.Integer(str(new))
                notes.append(f"{name} {v:g} → {new}")
                continue
            text = cst.Module([]).code_for_node(k.value)
            via = self._batch_dependent(k.value)
            if via is not None:  # decay_steps=STEPS_PER_EPOCH * 1000, STEPS_PER_EPOCH = N // BATCH_SIZE
                notes.append(f"{name}={text} follows the batch size through {via}")
            else:
                notes.append(
                    f"{name}={text} NOT divided by {self.factor}: the rate decays {self.factor}x slower per example"
                )
                self.warn(
                    f"{name}={text} (line {self.line(call)}) counts steps: divide it by {self.factor} with the batch"
                )
        if not notes:
            return ""
        same = all(" → " in n or "follows" in n for n in notes)
        return f" (its {', '.join(notes)}{': the same schedule per example' if same else ''})"

    def _batch_dependent(self, expr: cst.BaseExpression) -> str | None:
        """The name through which ``expr`` depends on the scaled batch size (itself, ``args.<dest>``, or
        a name computed from it however far: ``STEPS_PER_EPOCH = N_TRAIN // BATCH_SIZE``; ``train_ds =
        ....batch(BATCH_SIZE)``, ``total_steps = EPOCHS * len(train_ds)``), else None."""
        ref = self.batch_ref
        if ref is None:
            return None
        if _reads_name(expr, ref):
            return ref
        if self._batch_names is None:  # once: the script's assignments do not change while it is read
            assigned = assigned_values(self.module_tree)
            dependent: set[str] = set()
            grew = True
            while grew:
                grew = False
                for name, values in assigned.items():
                    if name not in dependent and any(
                        _reads_name(v, ref)
                        or any(isinstance(n, cst.Name) and n.value in dependent for n in walk(v))
                        for v in values
                    ):
                        dependent.add(name)
                        grew = True
            self._batch_names = dependent
        for n in walk(expr):
            if isinstance(n, cst.Name) and n.value in self._batch_names:
                return n.value
        return None

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> cst.CSTNode:  # type: ignore[override]
        updated = super().on_leave(original_node, updated_node)
        if id(original_node) in self.fit_batch and isinstance(updated, cst.Call):
            return set_kwarg(updated, "batch_size", cst.Integer(str(32 * self.factor)))
        new = self.edits.get(id(original_node))
        if new is not None and isinstance(new, cst.Call) and isinstance(updated, cst.Call):
            # an optimizer call given its default learning rate: keep the edits made inside it
            lr = kwarg(new, "learning_rate")
            if lr is not None and kwarg(updated, "learning_rate") is None:
                return set_kwarg(updated, "learning_rate", lr.value)
        if self.wrapper_before is not None and id(original_node) == self.wrapper_before:
            cls = cst.parse_statement(
                SCALED_SCHEDULE.format(base=self.wrapper_base, name=SCALED_SCHEDULE_NAME)
            )
            assert isinstance(updated, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            inner = self._note(original_node, updated)
            assert isinstance(inner, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
            blank = [cst.EmptyLine(), cst.EmptyLine()]  # PEP 8's two lines around a class
            cls = cls.with_changes(leading_lines=blank)
            own = list(inner.leading_lines)  # the statement keeps its comments
            while own and own[0].comment is None:
                own.pop(0)
            inner = inner.with_changes(leading_lines=[*blank, *own])
            return cst.FlattenSentinel([cls, inner])  # type: ignore[return-value]
        return self._note(original_node, updated)

    def _note(self, original_node: cst.CSTNode, updated: cst.CSTNode | cst.RemovalSentinel) -> cst.CSTNode:
        new = self.edits.get(id(original_node))
        if self.note_at is not None and id(original_node) == self.note_at:
            assert isinstance(updated, cst.SimpleStatementLine)
            comment = cst.EmptyLine(comment=cst.Comment(self.comment))
            return updated.with_changes(leading_lines=[*updated.leading_lines, comment])
        return new if new is not None else updated  # type: ignore[return-value]


class BatchScale(Fix):
    """Train on bigger batches: batch size ×2, ×4, ×8 until throughput stops rising, learning rate scaled.

    What it changes: the batch size where the script sets it (an argparse ``--batch-size`` or absl
    ``flags.DEFINE_integer("batch_size", ...)`` default, a
    ``BATCH_SIZE = N`` constant the script reads (or the number in ``BATCH_SIZE = 16 *
    strategy.num_replicas_in_sync``, as Kaggle's TPU starters write it; or its default when it reads the environment,
    ``int(os.environ.get("BATCH_SIZE", 64))``; skipped when the variable is set), a ``{"batch_size": N}``
    config dict, a config class's
    field (``@dataclass class TrainConfig: batch_size: int = 64``, read as ``cfg.batch_size``) or attribute
    (``config.batch_size = 128`` in an ``ml_collections.ConfigDict``), ``.batch(N)`` or
    ``batch_size=N``, a parameter's default ``def __init__(self, batch_size=64)`` or, where the script's
    calls pass it, the numbers they pass (keras-io's DDPG: ``Buffer(50000, 64)``); where the profiled ``fit`` trains on arrays and none of those is set, Keras's default
    made explicit: ``fit(x, y)`` → ``fit(x, y, batch_size=32×N)``), and the learning rate with it
    (followed through ``config["lr"]`` too, to the one dict of the script with that key when ``config``
    is a parameter given it, and through ``cfg.learning_rate`` to a config class's field or attribute):
    **linear** scaling for SGD/momentum (Goyal et al., 2017), **square-root** scaling for Adam-style
    optimizers (Adam, AdamW, RMSprop, Adagrad, …); on a loss summed over the batch (``reduction="sum"``, a
    ``reduce_sum`` the step differentiates or ``compute_loss`` returns) an SGD-style rate is left as it
    is, its gradient growing with the batch already (the summary says where the sum is). Every optimizer the script builds is scaled (a GAN's
    two; an optimizer class of its own, ``class GCRMSprop(RMSprop)``, as the optimizer it extends, its rate
    followed only by ``learning_rate=`` where the class has an ``__init__`` of its own); a default learning rate is made explicit (``Adam()`` → ``Adam(learning_rate=0.001×√N)``,
    ``optimizer="adam"`` → the class); a name is followed to its number (a module constant
    ``INIT_LR = 1e-3``, a parameter default ``lr=1e-3``, an argparse default, an environment variable's
    default, ``LEARNING_RATE * 10``,
    a schedule's ``initial_learning_rate`` (by keyword, or first for Keras's own schedules) with its
    other rates (Keras 3 ``CosineDecay``'s ``warmup_target``, the peak of a warm-up from 0.0;
    ``PolynomialDecay``'s ``end_learning_rate``), whose ``decay_steps`` / ``warmup_steps`` are divided by
    N: the same schedule per example; a ``PiecewiseConstantDecay``'s ``values`` scaled and its
    ``boundaries`` divided; a step count computed from the batch size, however indirectly
    (``STEPS_PER_EPOCH * 1000`` with ``STEPS_PER_EPOCH = N_TRAIN // BATCH_SIZE``, ``EPOCHS * len(train_ds)``
    of a dataset batched by it), already follows it and is left as it is, any other expression is said in
    the summary;
    a ``LearningRateSchedule`` subclass of the script's own (TensorFlow's Transformer tutorial's
    ``CustomSchedule``, its warm-up counted in steps) is wrapped in a ``TfdoctorScaledSchedule`` defined
    before its use: N times as far per step, its rate scaled by the rule), and, given the modules beside the script, in the one where the
    optimizer is built. A ``LearningRateScheduler(decay)`` sets the rate every epoch: the numbers ``decay``
    returns are scaled too (a rate computed from the ``lr`` it is given follows the scaled one; so does a
    local rate of its own, Keras's ``cifar10_resnet.py``'s ``lr = 1e-3`` then ``lr *= 1e-1``, whose number is
    scaled, and an optimizer built from ``decay(0)``; and module constants it computes every rate from,
    Kaggle's ``lrfn(epoch)`` ramping from ``LR_START`` to ``LR_MAX`` and decaying to ``LR_MIN``: the one set of
    constants every rate returned is proportional to is scaled, ``LR_RAMPUP_EPOCHS`` and ``LR_EXP_DECAY``
    left). A loop, or
    a callback's ``on_*`` method, that sets the rate itself (``optimizer.learning_rate = lr``) is said:
    computed from a constant scaled here, its step counts are not divided; a callback built with rates
    (ageron's 1cycle ``OneCycleScheduler(iterations, max_rate=0.05)``, a ``StepDecay(initial_lr, ...)``)
    gets each number given for a parameter named for a rate (``max_rate``, ``*lr*``, ``learning_rate``;
    not ``decay_rate``) scaled where it is built; else LEARNING RATE NOT SCALED.
    The summary line says which rule was used for which optimizer. A learning rate that cannot
    be scaled is never left silently: the summary says LEARNING RATE NOT SCALED and the patch carries a
    comment above the batch size. A batch size or learning rate given on the command line is not
    edited (the fix is skipped or warns). A batch the script reads at run time (``.batch(cfg["train"]
    ["batch_size"])`` from a YAML file, a module's attribute) is named in the skip, with its line. A batch
    drawn at random each step (a replay buffer's ``np.random.choice(n, self.batch_size)``, a DQN's
    ``random.sample(memory, batch_size)``, a GAN's ``np.random.randint(0, n, batch_size)``) is skipped
    before any run: such a loop runs as many updates whatever the batch, so a bigger one raises
    examples/s while the script takes longer (keras-io's DDPG: ×8 kept at "5.12x" in examples/s, each
    update 8 times the work, as many updates); to trade it for speed, divide the loop's iterations too.

    How it is measured: in examples/s (a step has more examples on purpose). ×2 first; ×4 only if ×2 was
    kept, and so on. A run that runs out of memory is rolled back with the error.

    Rolled back when: examples/s does not rise beyond the noise band, out of memory, losses not sane, a
    loss the judge finds summed over the batch with an SGD rate scaled linearly.
    """

    ID = "batch-scale"
    DESCRIPTION = "batch size ×N with the learning rate scaled"
    CODEMOD = BatchScaleCodemod
    AFTER = ("tf-function", "xla-jit", "mixed-precision", "steps-per-execution", "generator-prefetch")
    PRIORITY = 90
    SCALES_EXAMPLES = True

    def variants(self, ctx: FixContext) -> list[dict[str, str]]:
        return [{"factor": str(f)} for f in FACTORS]

    def follow_imports(self, out: FixOutcome, source: str, ctx: FixContext) -> FixOutcome:
        """The batch size where the script sets it, the learning rate where the optimizer is built: in
        a module beside the script when the script builds none."""
        if not out.changed or NO_OPTIMIZER not in out.reason:
            return super().follow_imports(out, source, ctx)
        for rel, text in ctx.project.items():
            sub = self.apply_module(rel, text, ctx, lr_only="1")
            if sub.changed:
                main = self.apply_source(source, replace(ctx, params={**ctx.params, "lr_elsewhere": rel}))
                return replace(
                    main,
                    files={rel: sub.code},
                    reason=f"{main.reason}; {rel}: {sub.reason}",
                    warnings=(*main.warnings, *sub.warnings),
                )
        return out


FIX = BatchScale
