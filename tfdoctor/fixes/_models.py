"""Which Keras models a script builds, and which of them compute the loss (read from the source).

A model is found where it is built: ``X = keras.Sequential([...])``, ``X = keras.Model(inputs, outputs)``
(``outputs`` followed to the layer call that made it), ``X = Sequential(); X.add(...)``, a function
returning one of those (``model = build_model()``), a ``keras.Model`` subclass (what its ``call`` returns),
or, for a subclass with no ``call``, each such model its ``__init__`` assigns to ``self.<attr>``. Its *output layer* is the constructor of the layer
that produces its output: the last layer of a Sequential (an ``Activation("softmax")`` after the last
``Dense`` included), the layer called to make each of a functional model's outputs.

The models that *compute the loss* are those whose output reaches a loss: a name-based, flow-insensitive
walk from model calls (``logits = model(x)``, ``self.discriminator(...)``: an attribute named like a
model variable) through assignments to loss calls (``loss_fn(y, logits)``, ``keras.losses.*``) and to
names with ``loss`` in them; plus the models compiled with a loss (``X.compile(loss=...)``). A model whose
output only feeds another model (a GAN's generator) is not one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from tfdoctor.fixes._cst import attr_name, call_name, dotted, kwarg, name_reads, own_nodes, walk

#: calls that only reshape a model's output: the layer under them is its output layer
SHAPE_OPS = frozenset({"squeeze", "reshape", "expand_dims", "flatten"})

#: activation functions a model's ``call`` may end with: their input is what gets cast to float32
ACTIVATION_OPS = frozenset({"sigmoid", "softmax", "log_softmax", "softplus", "tanh"})
#: calls whose result is a loss (the last part of the called name, lower case, contains one of these)
LOSS_WORDS = ("loss", "crossentropy", "mean_squared_error", "mean_absolute_error", "hinge", "kl_divergence")


@dataclass
class ModelDef:
    key: str  # the variable it is assigned to, or "build_model()"
    build: cst.Call  # the Sequential(...) / Model(...) call
    outputs: list[cst.Call] = field(default_factory=list)  # output layer constructor calls
    unresolved: str = ""  # why an output layer was not found
    # a subclass whose call() returns a model it was given (``self.student = student``): that
    # __init__ parameter's name and position (``self`` not counted)
    delegate: tuple[str, int] | None = None
    via: dict[int, str] = field(default_factory=dict)  # id(a delegated output layer) -> its model
    # id(a layer feeding an output layer that takes no dtype) -> that layer's class (keras-io's OCR:
    # ``CTCLayer(name="ctc_loss")(labels, x)``, an endpoint layer adding the loss: ``x``'s Dense)
    fed: dict[int, str] = field(default_factory=dict)
    # a subclass whose call() returns no layer of its own (keras-io's collaborative filtering:
    # ``return tf.nn.sigmoid(x)``): the expressions to cast to float32, an activation's input or the
    # value returned
    casts: list[tuple[cst.BaseExpression, str]] = field(default_factory=list)  # (expression, its activation)


def _init_given(init: cst.FunctionDef) -> dict[str, tuple[str, int]]:
    """``self.<attr> = <param>`` in ``__init__``: attr -> (the parameter, its position, ``self`` not
    counted)."""
    params = [p.name.value for p in (*init.params.posonly_params, *init.params.params)][1:]
    given: dict[str, tuple[str, int]] = {}
    for a in walk(init):
        if (
            isinstance(a, cst.Assign)
            and len(a.targets) == 1
            and (dotted(a.targets[0].target) or "").startswith("self.")
            and isinstance(a.value, cst.Name)
            and a.value.value in params
        ):
            given[(dotted(a.targets[0].target) or "")[5:]] = (a.value.value, params.index(a.value.value))
    return given


def _target_names(t: cst.BaseExpression) -> list[str]:
    """Names an assignment target binds (``x``, ``a, (b, c)``; not ``self.x`` or ``d[k]``)."""
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for el in t.elements for n in _target_names(el.value)]
    return []


def _instance_arg(call: cst.Call, param: str, pos: int) -> cst.Arg | None:
    """The argument a call making an instance gives ``__init__``'s ``param`` (at ``pos``): by keyword,
    else by position."""
    arg = kwarg(call, param)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if arg is None and pos < len(positional):
        arg = positional[pos]
    return arg


def _init_of(cls: cst.ClassDef) -> cst.FunctionDef | None:
    """The class's own ``__init__``, if it defines one."""
    return next(
        (f for f in cls.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "__init__"), None
    )


def _init_forwards(cls: cst.ClassDef) -> bool:
    """Whether ``cls(...)`` takes ``Model``'s own arguments: no ``__init__``, or one taking ``*args`` or
    ``inputs`` / ``outputs``."""
    init = _init_of(cls)
    if init is None:
        return True
    names = {p.name.value for p in (*init.params.posonly_params, *init.params.params)}
    return isinstance(init.params.star_arg, cst.Param) or bool(names & {"inputs", "outputs"})


def _is_sequential(call: cst.Call) -> bool:
    return (call_name(call) or "").split(".")[-1] == "Sequential"


def _is_functional(call: cst.Call, subclasses: frozenset[str] = frozenset()) -> bool:
    """``Model(inputs, outputs)``, or a subclass of the script's built the same way (keras-io's
    "Customizing what happens in fit": ``CustomModel(inputs, outputs)``, overriding only ``train_step``)."""
    name = (call_name(call) or "").split(".")[-1]
    return (name == "Model" or name in subclasses) and (
        kwarg(call, "outputs") is not None or sum(1 for a in call.args if a.keyword is None) >= 2
    )


def layer_classes_taking_dtype(tree: cst.Module) -> dict[str, bool]:
    """Layer classes defined in the file: whether their constructor passes ``dtype`` on (``**kwargs``)."""
    out: dict[str, bool] = {}
    for cls in walk(tree):
        if isinstance(cls, cst.ClassDef) and isinstance(cls.body, cst.IndentedBlock):
            init = _init_of(cls)
            out[cls.name.value] = init is None or isinstance(init.params.star_kwarg, cst.Param)
    return out


class Models:
    def __init__(self, tree: cst.Module):
        self.tree = tree
        self.defs: dict[str, ModelDef] = {}
        # variable name -> the keys of every model assigned to it (TensorFlow's autoencoder tutorial
        # fits ``autoencoder = Autoencoder(...)``, then ``autoencoder = Denoise()``)
        self.vars: dict[str, list[str]] = {}
        self._layer_names: set[str] | None = None  # classes the script imports from a layers module
        self._applied: dict[int, cst.Call] = {}  # id(a layer constructor) -> the call applying it
        # models a Metric subclass builds (keras-io DDIM's KID encoder): their output meets the metric's
        # float32 math, whether or not it reaches a loss
        self.metric_models: set[str] = set()
        assigns = [n for n in walk(tree) if isinstance(n, cst.Assign)]
        self._assigns = assigns
        # Model subclasses without a call() of their own: built like Model(inputs, outputs) where their
        # __init__ (if any) takes what Model's does (keras-io's DDIM builds ``DiffusionModel(image_size,
        # widths, block_depth)``: its own parameters, not a functional model's inputs and outputs)
        self._subclasses = frozenset(
            cls.name.value
            for cls in walk(tree)
            if isinstance(cls, cst.ClassDef)
            and any((dotted(b.value) or "").split(".")[-1] == "Model" for b in cls.bases)
            and not any(isinstance(f, cst.FunctionDef) and f.name.value == "call" for f in cls.body.body)
            and _init_forwards(cls)
        )
        # X = Sequential([...]) / Model(...)
        for a in assigns:
            if len(a.targets) != 1 or not isinstance(a.targets[0].target, cst.Name):
                continue
            name = a.targets[0].target.value
            if isinstance(a.value, cst.Call) and (_is_sequential(a.value) or self._functional(a.value)):
                self._add(name, a.value)
        # def build_model(): ... return Sequential(...) / return Model(...) / return <var>
        for fn in walk(tree):
            if not isinstance(fn, cst.FunctionDef):
                continue
            for r in walk(fn.body):
                if isinstance(r, cst.Return) and r.value is not None:
                    v = r.value
                    key = f"{fn.name.value}()"
                    if isinstance(v, cst.Call) and (_is_sequential(v) or self._functional(v)):
                        self._add(key, v)
                    elif isinstance(v, cst.Name) and v.value in self.defs:
                        self.defs[key] = self.defs[v.value]
        # model = build_model()
        for a in assigns:
            if (
                len(a.targets) == 1
                and isinstance(a.targets[0].target, cst.Name)
                and isinstance(a.value, cst.Call)
                and isinstance(a.value.func, cst.Name)
                and f"{a.value.func.value}()" in self.defs
            ):
                self._bind(a.targets[0].target.value, f"{a.value.func.value}()")
        # class MyModel(keras.Model) with call() returning self.<layer>(...): that layer; any other class
        # (a trainer, a Metric: keras-io DDIM's KID holds ``self.encoder = keras.Sequential([...])``):
        # the models its __init__ builds
        for cls in walk(tree):
            if not isinstance(cls, cst.ClassDef):
                continue
            if any((dotted(b.value) or "").split(".")[-1] == "Model" for b in cls.bases):
                self._add_subclass(cls)
            else:
                self._init_models(cls, self._init_attrs(cls))
        for a in assigns:  # model = MyModel(...)
            if (
                len(a.targets) == 1
                and isinstance(a.targets[0].target, cst.Name)
                and isinstance(a.value, cst.Call)
                and isinstance(a.value.func, cst.Name)
                and a.value.func.value in self.defs
                and not a.value.func.value.endswith("()")
            ):
                self._bind(a.targets[0].target.value, a.value.func.value)
        for key in self.defs:
            if not key.endswith("()"):
                self._bind(key, key)
        self._given_attrs()
        self._delegates()
        layer_ok = layer_classes_taking_dtype(tree)
        for d in self.defs.values():
            kept = []
            for c in d.outputs:
                layer_cls = (call_name(c) or "").split(".")[-1]
                if layer_ok.get(layer_cls, True):
                    kept.append(c)
                    continue
                # an endpoint layer of the script's (it takes the labels and the prediction, adds the
                # loss, returns the prediction): the layers making its inputs are the outputs to keep
                fed = [
                    f
                    for f in self._fed_to(c, d.build)
                    if layer_ok.get((call_name(f) or "").split(".")[-1], True)
                ]
                for f in fed:
                    if not any(f is k for k in kept):
                        kept.append(f)
                        d.fed[id(f)] = layer_cls
                if not fed:
                    d.unresolved = f"{layer_cls} (defined in the script) takes no dtype argument"
            d.outputs = kept

    def _functional(self, call: cst.Call) -> bool:
        return _is_functional(call, self._subclasses)

    def _bind(self, name: str, key: str) -> None:
        keys = self.vars.setdefault(name, [])
        if key not in keys:
            keys.append(key)

    def _add(self, key: str, build: cst.Call, name: str | None = None) -> None:
        """The model ``build`` as ``key``; ``name``: what the script calls it where not ``key``
        (``self.encoder``, for its ``.add(...)`` calls)."""
        d = ModelDef(key, build, self._outputs_of(name or key, build))
        prev = self.defs.get(key)
        if prev is not None and prev.build is not build:
            # the name holds another model later (TensorFlow's image-classification tutorial trains
            # ``model``, then a second ``model`` with augmentation): each one's output layer
            d.outputs = [*prev.outputs, *(c for c in d.outputs if c not in prev.outputs)]
        if not d.outputs:
            d.unresolved = "its output layer is not a layer call in the script"
        self.defs[key] = d

    def _outputs_of(self, key: str, build: cst.Call) -> list[cst.Call]:
        """The output layers of the Sequential or functional model ``build`` (``key``: the name it is
        assigned to, for ``key.add(...)``)."""
        outputs: list[cst.Call] = []
        if _is_sequential(build):
            layers = build.args[0].value if build.args else None
            if isinstance(layers, (cst.List, cst.Tuple)) and layers.elements:
                last = layers.elements[-1].value
                if isinstance(last, cst.Call):
                    outputs.append(last)
            else:  # X = Sequential(); X.add(layer) ...
                adds = [
                    c
                    for c in walk(self.tree)
                    if isinstance(c, cst.Call)
                    and attr_name(c) == "add"
                    and isinstance(c.func, cst.Attribute)
                    and dotted(c.func.value) == key
                    and c.args
                    and isinstance(c.args[0].value, cst.Call)
                ]
                if adds:
                    outputs.append(adds[-1].args[0].value)  # type: ignore[arg-type]
        else:
            out_arg = kwarg(build, "outputs")
            value = (
                out_arg.value
                if out_arg is not None
                else [a for a in build.args if a.keyword is None][1].value
            )
            for expr in self._elements(value):
                layer = self._layer_of(expr, build)
                if layer is not None:
                    outputs.append(layer)
                else:  # a model nested in this one makes the output: its output layers
                    outputs += [o for o in self._nested_outputs(expr, build) if o not in outputs]
        return outputs

    def _nested_outputs(self, expr: cst.BaseExpression, before: cst.Call) -> list[cst.Call]:
        """keras-io's VQ-VAE: ``decoder = get_decoder(latent_dim)`` ... ``reconstructions =
        decoder(quantized_latents)``, ``return keras.Model(inputs, reconstructions)``: the output layers of
        the model called (a builder function's, or a model assigned to the name), else none."""
        if isinstance(expr, cst.Name):
            found = self._assigned_before(expr.value, before)
            if not isinstance(found, cst.Call):
                return []
            expr = found
        if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)):
            return []
        made = self._assigned_before(expr.func.value, before)
        if isinstance(made, cst.Call) and isinstance(made.func, cst.Name):
            d = self.defs.get(f"{made.func.value}()")
            return list(d.outputs) if d is not None else []
        # a model assigned to the name: bound once every model is known, or (keras-io's seq2seq
        # Transformer: ``decoder = keras.Model(...)``, then ``decoder_outputs = decoder([...])`` and
        # ``transformer = keras.Model([...], decoder_outputs)``) a model met before this one
        keys = self.vars.get(expr.func.value, []) or (
            [expr.func.value] if expr.func.value in self.defs else []
        )
        return [o for k in keys if k in self.defs for o in self.defs[k].outputs]

    @staticmethod
    def _init_attrs(cls: cst.ClassDef) -> dict[str, cst.Call]:
        """``self.<attr> = <call>`` in the class's ``__init__``: attr -> that call."""
        init = _init_of(cls)
        attrs: dict[str, cst.Call] = {}
        for a in walk(init) if init is not None else ():
            if (
                isinstance(a, cst.Assign)
                and len(a.targets) == 1
                and (dotted(a.targets[0].target) or "").startswith("self.")
                and isinstance(a.value, cst.Call)
            ):
                attrs[(dotted(a.targets[0].target) or "")[5:]] = a.value
        return attrs

    def _init_models(self, cls: cst.ClassDef, attrs: dict[str, cst.Call]) -> None:
        """Each Sequential or functional model ``__init__`` assigns to ``self.<attr>`` is a model of its
        own (``Cls.attr``); one a builder function of the script's returns is that function's (keras-io's
        DDIM: ``self.network = get_network(image_size, widths, block_depth)``)."""
        metric = any((dotted(b.value) or "").split(".")[-1] == "Metric" for b in cls.bases)
        for attr, built in attrs.items():
            if _is_sequential(built) or self._functional(built):
                self._add(f"{cls.name.value}.{attr}", built, f"self.{attr}")
                self._bind(attr, f"{cls.name.value}.{attr}")
                if metric:
                    self.metric_models.add(f"{cls.name.value}.{attr}")
            elif isinstance(built.func, cst.Name) and f"{built.func.value}()" in self.defs:
                self._bind(attr, f"{built.func.value}()")

    def _add_subclass(self, cls: cst.ClassDef) -> None:
        methods = {f.name.value: f for f in cls.body.body if isinstance(f, cst.FunctionDef)}
        call, init = methods.get("call"), methods.get("__init__")
        attrs = self._init_attrs(cls)
        if call is None:
            # no call(): a train_step-only subclass wraps models built elsewhere, and one whose own
            # methods run models it builds in __init__ (TensorFlow's CVAE tutorial: ``self.encoder =
            # tf.keras.Sequential([...])``, ``encode()`` / ``decode()`` called by the loss function) has
            # each of those as a model of its own
            self._init_models(cls, attrs)
            return
        given = _init_given(init) if init is not None else {}  # self.<attr> = <__init__ parameter>
        d = ModelDef(cls.name.value, cst.Call(func=cst.Name(cls.name.value)))
        # a name returned: the layer last called to assign it in call() (``x = self.dense(x)`` ...
        # ``return x``); a tuple returned (``return x, states``): its first element, the prediction, and
        # each other element that is itself a layer of the model (an actor-critic's ``return
        # self.actor(x), self.critic(x)``: both heads reach the loss)
        named: dict[str, cst.BaseExpression] = {}
        for a in own_nodes(call.body):
            if isinstance(a, cst.Assign) and len(a.targets) == 1:
                t = a.targets[0].target
                if isinstance(t, cst.Name):
                    named[t.value] = a.value
                elif (
                    isinstance(t, (cst.Tuple, cst.List))
                    and t.elements
                    and isinstance(t.elements[0].value, cst.Name)
                ):
                    named[t.elements[0].value.value] = a.value
        for r in walk(call.body):
            if isinstance(r, cst.Return) and r.value is not None:
                elements = (
                    [el.value for el in r.value.elements]
                    if isinstance(r.value, cst.Tuple) and r.value.elements
                    else self._elements(r.value)
                )
                for i, e in enumerate(elements):
                    if isinstance(e, cst.Name) and e.value in named:
                        e = named[e.value]
                    layer = (
                        isinstance(e, cst.Call)
                        and isinstance(e.func, cst.Attribute)
                        and dotted(e.func.value) == "self"
                        and e.func.attr.value in attrs
                    )
                    if i > 0 and isinstance(r.value, cst.Tuple) and not layer:
                        continue  # ``return x, states``: the state is not a prediction
                    if layer:
                        assert isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute)
                        built = attrs[e.func.attr.value]
                        # a Sequential or functional model held as an attribute (``self.decoder =
                        # Sequential([...])``): its output layer (a model takes no dtype of its own)
                        inner = (
                            self._outputs_of(f"self.{e.func.attr.value}", built)
                            if _is_sequential(built) or self._functional(built)
                            else [built]
                        )
                        d.outputs += [o for o in inner if not any(o is p for p in d.outputs)]
                    elif (  # keras-io's Distiller: ``return self.student(x)``, the student given
                        isinstance(e, cst.Call)
                        and isinstance(e.func, cst.Attribute)
                        and dotted(e.func.value) == "self"
                        and e.func.attr.value in given
                    ):
                        d.delegate = given[e.func.attr.value]
        if not d.outputs:
            d.unresolved = f"{cls.name.value}.call() does not return a layer built in __init__"
            if d.delegate is None:
                d.casts = self._returned_ops(call)
        self.defs[cls.name.value] = d

    @staticmethod
    def _returned_ops(call: cst.FunctionDef) -> list[tuple[cst.BaseExpression, str]]:
        """What to cast to float32 in a ``call()`` returning an op rather than a layer: the input of an
        activation it returns (``tf.nn.sigmoid(x)``, ``ops.softmax(logits)``), else the value returned
        (``return x`` with ``x = dot + bias``), the first of a tuple; not a dict or list of outputs."""
        found: list[tuple[cst.BaseExpression, str]] = []
        for r in own_nodes(call.body):
            if not isinstance(r, cst.Return) or r.value is None:
                continue
            e = r.value.elements[0].value if isinstance(r.value, cst.Tuple) and r.value.elements else r.value
            if isinstance(e, (cst.Tuple, cst.List, cst.Dict, cst.BaseString, cst.Integer, cst.Float)):
                continue
            if isinstance(e, cst.Name) and e.value in ("None", "True", "False"):
                continue
            if (
                isinstance(e, cst.Call)
                and (call_name(e) or "").split(".")[-1] in ACTIVATION_OPS
                and e.args
                and e.args[0].keyword is None
                and not (dotted(e.func) or "").startswith("self.")
            ):
                found.append((e.args[0].value, call_name(e) or ""))
            else:
                found.append((e, ""))
        return found

    def _given_attrs(self) -> None:
        """``self.<attr> = <param>`` in a class's ``__init__``, and a call making an instance handing it
        a model, by name or as a call of the function building it: the attribute names that model (keras-io's
        WGAN-GP: ``WGAN(discriminator=d_model, ...)``, ``self.discriminator = discriminator``, then
        ``self.discriminator(...)`` in ``train_step``)."""
        for cls in walk(self.tree):
            if not isinstance(cls, cst.ClassDef):
                continue
            init = _init_of(cls)
            given = _init_given(init) if init is not None else {}
            for c in walk(self.tree) if given else ():
                if not (
                    isinstance(c, cst.Call)
                    and isinstance(c.func, cst.Name)
                    and c.func.value == cls.name.value
                ):
                    continue
                for attr, (param, pos) in given.items():
                    arg = _instance_arg(c, param, pos)
                    if arg is not None and isinstance(arg.value, cst.Name):
                        for key in list(self.vars.get(arg.value.value, ())):
                            self._bind(attr, key)
                    elif (  # a builder's call handed straight in (keras-io's SimSiam:
                        # ``SimSiam(get_encoder(), get_predictor())``)
                        arg is not None
                        and isinstance(arg.value, cst.Call)
                        and isinstance(arg.value.func, cst.Name)
                        and f"{arg.value.func.value}()" in self.defs
                    ):
                        self._bind(attr, f"{arg.value.func.value}()")

    def _delegates(self) -> None:
        """A subclass whose ``call`` returns the model it was given: that model's output layers, from
        the calls making an instance (``Distiller(student=student, teacher=teacher)``)."""
        for d in self.defs.values():
            if d.delegate is None or d.outputs:
                continue
            param, pos = d.delegate
            for c in walk(self.tree):
                if not (isinstance(c, cst.Call) and isinstance(c.func, cst.Name) and c.func.value == d.key):
                    continue
                arg = _instance_arg(c, param, pos)
                given = self.vars.get(arg.value.value, []) if arg and isinstance(arg.value, cst.Name) else []
                for g in given:
                    for layer in self.defs[g].outputs if g != d.key else ():
                        if not any(o is layer for o in d.outputs):
                            d.outputs.append(layer)
                            d.via[id(layer)] = g
            if d.outputs:
                d.unresolved = ""

    @staticmethod
    def _elements(value: cst.BaseExpression) -> list[cst.BaseExpression]:
        if isinstance(value, (cst.List, cst.Tuple)):
            return [e.value for e in value.elements]
        if isinstance(value, cst.Dict):
            return [e.value for e in value.elements if isinstance(e, cst.DictElement)]
        return [value]

    def _layer_of(self, expr: cst.BaseExpression, before: cst.Call) -> cst.Call | None:
        """``Dense(10)(x)`` -> the ``Dense(10)`` call; ``head(x)`` with ``head = Dense(1)`` -> that call;
        a name -> the layer call last assigned to it."""
        if isinstance(expr, cst.Name):
            # the last assignment of the name before the model is built, in the scope building it: two
            # builder functions that both write ``x = ...(x)`` must not see each other's layers
            found = self._assigned_before(expr.value, before)
            if not isinstance(found, cst.Call):
                return None
            expr = found
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Call):
            self._applied[id(expr.func)] = expr
            return expr.func
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and attr_name(expr) in SHAPE_OPS
            and expr.args
            and expr.args[0].keyword is None
        ):
            # keras-io's PPO: ``value = keras.ops.squeeze(mlp(...), axis=1)``: the layer under the reshape
            return self._layer_of(expr.args[0].value, before)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
            # a layer made first and called later (TF's transfer-learning tutorial:
            # ``prediction_layer = tf.keras.layers.Dense(1)`` ... ``outputs = prediction_layer(x)``)
            layer = self._assigned_before(expr.func.value, before)
            if isinstance(layer, cst.Call) and self._is_layer_class(layer):
                self._applied[id(layer)] = expr
                return layer
            if layer is None:
                return self._returned_layer(expr.func.value)
        return None

    def _returned_layer(self, name: str) -> cst.Call | None:
        """The layer a function of the script named ``name`` returns the output of, as its one return
        (keras-io's PPO: ``def mlp(x, sizes, ...)`` ends ``return layers.Dense(units=sizes[-1], ...)(x)``,
        and both the actor and the critic are built on ``mlp(observation_input, ...)``)."""
        fns = [f for f in walk(self.tree) if isinstance(f, cst.FunctionDef) and f.name.value == name]
        if len(fns) != 1:
            return None
        returns = [r for r in walk(fns[0].body) if isinstance(r, cst.Return) and r.value is not None]
        if len(returns) != 1:
            return None
        v = returns[0].value
        if isinstance(v, cst.Call) and isinstance(v.func, cst.Call) and self._is_layer_class(v.func):
            self._applied[id(v.func)] = v
            return v.func
        return None

    def _fed_to(self, layer: cst.Call, before: cst.Call) -> list[cst.Call]:
        """The layers whose outputs ``layer`` is applied to in the model built by ``before``
        (``CTCLayer()(labels, x)``: ``x``'s layer; an ``Input`` is no layer call and is left out)."""
        applied = self._applied.get(id(layer))
        if applied is None:
            return []
        found = (self._layer_of(a.value, before) for a in applied.args if not a.star)
        return [f for f in found if f is not None and f is not layer]

    def _assigned_before(self, name: str, before: cst.Call) -> cst.BaseExpression | None:
        """The value last assigned to ``name`` before ``before``, in the scope holding it (the
        module's when that scope assigns it nowhere)."""
        found = None
        for scope in dict.fromkeys([self._scope_of(before), self.tree]):
            for a in own_nodes(scope):
                if a is before:
                    break
                if (
                    isinstance(a, cst.Assign)
                    and len(a.targets) == 1
                    and isinstance(a.targets[0].target, cst.Name)
                    and a.targets[0].target.value == name
                ):
                    found = a.value
            if found is not None:
                break
        return found

    def _is_layer_class(self, call: cst.Call) -> bool:
        """``call`` builds a Keras layer: a class from a ``layers`` module (``tf.keras.layers.Dense``,
        ``layers.Dense``, ``from keras.layers import Dense``) or a Layer subclass of the script's. Not
        a model (``MobileNetV2(...)``, ``Sequential``): it may take no ``dtype``, its output layer is
        inside it."""
        name = call_name(call) or ""
        parts = name.split(".")
        if "layers" in parts[:-1]:
            return True
        if self._layer_names is None:
            self._layer_names = {
                cls.name.value
                for cls in walk(self.tree)
                if isinstance(cls, cst.ClassDef)
                and any((dotted(b.value) or "").split(".")[-1] == "Layer" for b in cls.bases)
            }
            for imp in walk(self.tree):
                if (
                    isinstance(imp, cst.ImportFrom)
                    and imp.module is not None
                    and (dotted(imp.module) or "").split(".")[-1] == "layers"
                    and not isinstance(imp.names, cst.ImportStar)
                ):
                    for alias in imp.names:
                        bound = alias.asname.name if alias.asname else alias.name
                        if isinstance(bound, cst.Name):
                            self._layer_names.add(bound.value)
        return len(parts) == 1 and name in self._layer_names

    def _scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost function holding ``node`` (its body), or the module."""
        scope: cst.CSTNode = self.tree
        for fn in walk(self.tree):  # pre-order: a nested function comes after the one holding it
            if isinstance(fn, cst.FunctionDef) and any(n is node for n in walk(fn.body)):
                scope = fn.body
        return scope

    # -- which models compute the loss ---------------------------------------------------------------
    def model_of(self, func: cst.BaseExpression) -> set[str]:
        """The models a call of ``func`` may run: ``model(...)``, ``self.discriminator(...)`` (every
        model the name is assigned anywhere)."""
        if isinstance(func, cst.Name):
            return set(self.vars.get(func.value, ()))
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            return set(self.vars.get(func.attr.value, ()))
        return set()

    def _scopes(self) -> tuple[dict[int, cst.FunctionDef], dict[int, set[str]], dict[int, cst.FunctionDef]]:
        """(id(a node) -> the function it runs in, id(a function) -> the names local to it, id(a function)
        -> the function holding it). A module-level node is in no function."""
        where: dict[int, cst.FunctionDef] = {}
        local: dict[int, set[str]] = {}
        parent: dict[int, cst.FunctionDef] = {}
        for fn in walk(self.tree):
            if not isinstance(fn, cst.FunctionDef):
                continue
            names = {
                p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
            }
            declared: set[str] = set()
            for n in own_nodes(fn.body):
                where[id(n)] = fn
                if isinstance(n, cst.FunctionDef):
                    parent[id(n)] = fn
                elif isinstance(n, (cst.Global, cst.Nonlocal)):
                    declared.update(a.name.value for a in n.names)
                elif isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                    for t in n.targets if isinstance(n, cst.Assign) else [n]:
                        names.update(_target_names(t.target))
                elif isinstance(n, (cst.For, cst.CompFor)):
                    names.update(_target_names(n.target))
                elif isinstance(n, cst.WithItem) and n.asname is not None:
                    names.update(_target_names(n.asname.name))
            local[id(fn)] = names - declared
        return where, local, parent

    def loss_models(self) -> tuple[list[str], list[str]]:
        """(keys of the models whose output reaches a loss, how each was told)."""
        # a name is read where it is bound: a function's local ``batch_size`` (keras-io DDIM's KID metric:
        # ``batch_size = tf.shape(real_features)[0]``) is not the module's ``batch_size`` the train_step
        # reads (flow-insensitive within a scope)
        where, local, parent = self._scopes()
        taint: dict[tuple[int, str], set[str]] = {}

        def key(name: str, node: cst.CSTNode) -> tuple[int, str]:
            fn = where.get(id(node))
            while fn is not None:
                if name in local.get(id(fn), ()):
                    return id(fn), name
                fn = parent.get(id(fn))
            return 0, name

        returned: dict[str, set[str]] = {}  # function or method name -> the models its returns carry

        def of(e: cst.CSTNode) -> set[str]:
            if isinstance(e, cst.Call):
                m = self.model_of(e.func)
                if m:
                    return m
                # ``self.denoise(...)``, ``compute_loss(...)``: what that function returns
                fname = e.func.attr.value if isinstance(e.func, cst.Attribute) else dotted(e.func)
                if fname in returned:
                    return returned[fname] | of_args(e)
            if isinstance(e, cst.Name):
                return set(taint.get(key(e.value, e), ()))
            out: set[str] = set()
            for c in e.children:
                if isinstance(c, cst.Attribute):
                    out |= of(c.value)
                elif not isinstance(c, (cst.Lambda, cst.FunctionDef)):
                    out |= of(c)
            return out

        def of_args(e: cst.Call) -> set[str]:
            out: set[str] = set()
            for a in e.args:
                out |= of(a.value)
            return out

        returns = [
            (fn.name.value, r)
            for fn in walk(self.tree)
            if isinstance(fn, cst.FunctionDef)
            for r in own_nodes(fn.body)
            if isinstance(r, cst.Return) and r.value is not None
        ]

        changed = True
        while changed:  # flow-insensitive: until no name gets a new model
            changed = False
            for fname, r in returns:
                got = of(r.value) if r.value is not None else set()
                if not got <= returned.get(fname, set()):
                    returned.setdefault(fname, set()).update(got)
                    changed = True
            for a in self._assigns:
                got = of(a.value)
                if not got:
                    continue
                for t in a.targets:
                    for name in _target_names(t.target):
                        slot = key(name, a)
                        if not got <= taint.get(slot, set()):
                            taint.setdefault(slot, set()).update(got)
                            changed = True
        found: dict[str, str] = {}
        for n in walk(self.tree):
            if isinstance(n, cst.Call):
                last = (call_name(n) or attr_name(n) or "").split(".")[-1].lower()
                if any(w in last for w in LOSS_WORDS):
                    for arg in n.args:
                        for m in of(arg.value):
                            found.setdefault(m, f"its output reaches {call_name(n) or last}()")
                if attr_name(n) == "compile" and isinstance(n.func, cst.Attribute):
                    has_loss = (
                        kwarg(n, "loss") is not None or sum(1 for a in n.args if a.keyword is None) >= 2
                    )
                    for compiled in self.vars.get(dotted(n.func.value) or "", ()) if has_loss else ():
                        found.setdefault(compiled, "compiled with a loss")
                if attr_name(n) in ("fit", "train_on_batch") and isinstance(n.func, cst.Attribute):
                    # fit computes a loss whatever compile() was given (a compute_loss override)
                    for trained in self.vars.get(dotted(n.func.value) or "", ()):
                        found.setdefault(trained, f"trained with {attr_name(n)}()")
            elif isinstance(n, cst.Assign):
                names = [x for t in n.targets for x in _target_names(t.target)]
                if any("loss" in x.lower() for x in names):
                    for m in of(n.value):
                        found.setdefault(m, f"its output reaches {names[0]}")
        if found:  # (with none found, every model's output is kept: the metric's among them)
            for m in self.metric_models:
                found.setdefault(m, "a metric's model, its output meets the metric's float32 math")
        keys: list[str] = []
        for k in self.defs:  # one key per model (``d_model`` is what ``get_discriminator_model()`` returns)
            if k in found and not any(self.defs[k] is self.defs[o] for o in keys):
                keys.append(k)
        return keys, [f"{k}: {found[k]}" for k in keys]


#: keyword arguments of keras.Model.compile (Keras 3)
KERAS_COMPILE_ARGS = frozenset(
    {
        "optimizer",
        "loss",
        "loss_weights",
        "metrics",
        "weighted_metrics",
        "run_eagerly",
        "steps_per_execution",
        "jit_compile",
        "auto_scale_loss",
        "sample_weight_mode",
        "target_tensors",
        "distribute",
        "pss_evaluation_shards",
    }
)


def _is_super_compile(call: cst.Call) -> bool:
    f = call.func
    return (
        isinstance(f, cst.Attribute)
        and f.attr.value == "compile"
        and isinstance(f.value, cst.Call)
        and call_name(f.value) == "super"
    )


def compile_sites(
    tree: cst.Module, line: Callable[[cst.CSTNode], int]
) -> tuple[list[tuple[cst.Call, str]], list[str]]:
    """Where a ``keras.Model.compile`` setting (``jit_compile``, ``steps_per_execution``) can go.

    Returns (the calls to add it to, with a label; why other compile calls were left alone). A model
    whose class (defined in the script) overrides ``compile`` with its own signature gets the setting on
    the ``super().compile(...)`` call of that override; an override without one, or a ``compile`` call
    with keywords keras.Model.compile does not take, is left alone with the reason."""
    overrides: dict[str, cst.FunctionDef] = {}
    for cls in walk(tree):
        if isinstance(cls, cst.ClassDef) and isinstance(cls.body, cst.IndentedBlock):
            for fn in cls.body.body:
                if isinstance(fn, cst.FunctionDef) and fn.name.value == "compile":
                    overrides[cls.name.value] = fn
    instance_of: dict[str, str] = {}
    for a in walk(tree):
        if (
            isinstance(a, cst.Assign)
            and len(a.targets) == 1
            and isinstance(a.value, cst.Call)
            and isinstance(a.value.func, cst.Name)
            and a.value.func.value in overrides
        ):
            target = dotted(a.targets[0].target)
            if target:
                instance_of[target] = a.value.func.value
                if target.startswith("self."):
                    instance_of[target[5:]] = a.value.func.value
    sites: list[tuple[cst.Call, str]] = []
    notes: list[str] = []
    done: set[int] = set()
    for c in walk(tree):
        if not (isinstance(c, cst.Call) and attr_name(c) == "compile" and isinstance(c.func, cst.Attribute)):
            continue
        recv = dotted(c.func.value)
        if recv is None:
            continue
        owner = instance_of.get(recv)
        if owner is not None:
            fn = overrides[owner]
            sup = next((n for n in walk(fn) if isinstance(n, cst.Call) and _is_super_compile(n)), None)
            if sup is None:
                notes.append(
                    f"{owner}.compile() (line {line(fn)}) overrides keras.Model.compile without calling "
                    "super().compile()"
                )
            elif id(sup) not in done:
                done.add(id(sup))
                sites.append((sup, f"super().compile() in {owner}.compile(), which {recv}.compile() calls"))
            continue
        keywords = [a.keyword.value for a in c.args if a.keyword is not None]
        if not (any(k in ("optimizer", "loss") for k in keywords) or len(c.args) >= 2):
            continue
        unknown = [k for k in keywords if k not in KERAS_COMPILE_ARGS]
        if unknown:
            notes.append(
                f"{recv}.compile() at line {line(c)} takes {', '.join(unknown)}: not keras.Model.compile "
                "(its class is not in the script)"
            )
            continue
        sites.append((c, f"{recv}.compile()"))
    untrained = _never_trained([r for c, r in sites], tree)
    if untrained:
        kept: list[tuple[cst.Call, str]] = []
        for c, label in sites:
            recv = label.removesuffix(".compile()")
            if recv in untrained:
                notes.append(
                    f"{label} at line {line(c)}: {recv} is only evaluated, never trained: left alone"
                )
            else:
                kept.append((c, label))
        sites = kept
    return sites, notes


#: what a model that is compiled only to be evaluated or exported has called on it
NOT_TRAINING = frozenset(
    {"compile", "evaluate", "predict", "predict_on_batch", "test_on_batch", "summary", "save", "export"}
)


def _never_trained(labels: list[str], tree: cst.Module) -> set[str]:
    """The plain names among compile sites' ``labels`` (``export_model.compile()``) whose model the script
    only compiles, evaluates, predicts with or saves (TensorFlow's text-classification tutorial compiles
    an export model with the vectorisation layer to evaluate it), when another site's model is fitted.
    A name used any other way (passed to a function, returned, aliased) may be trained there: kept."""
    names = {lab.removesuffix(".compile()") for lab in labels if lab.endswith(".compile()")}
    names = {n for n in names if n.isidentifier()}
    if len(names) < 2:
        return set()
    fitted: set[str] = set()
    other: set[str] = set()
    for name, attr in name_reads(tree):
        if name not in names:
            continue
        if attr in ("fit", "train_on_batch", "fit_generator"):
            fitted.add(name)
        elif attr not in NOT_TRAINING:
            other.add(name)
    if not fitted:
        return set()
    return names - fitted - other
