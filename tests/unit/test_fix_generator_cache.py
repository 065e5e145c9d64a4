"""generator-cache: the codemod (before/after on dedented sources, skips with reasons) and the code it
writes, executed with numpy only: same arrays bit for bit, hits from the second pass, copies out, the
memory cap, arguments it cannot key; methods reached through self (class_trainer.py's Trainer, run on a
Keras-free stand-in class) and generators nested in a function. No TensorFlow is imported."""

from __future__ import annotations

import ast
import textwrap
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import libcst as cst
import numpy as np
import pytest

from tfdoctor.fixes import FixContext, get_fix
from tfdoctor.fixes._cst import imports_end
from tfdoctor.fixes.generator_cache import HELPER

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def d(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def apply(before: str) -> Any:
    return get_fix("generator-cache").apply(d(before), FixContext())


def helper_code(name: str = "tfdoctor_memoize") -> str:
    return HELPER.format(name=name, max_bytes="1 << 30").strip("\n")


def assert_skipped(before: str, why: str) -> str:
    out = apply(before)
    assert out.status == "skipped", out.reason
    assert out.code == d(before)
    assert why in out.reason, out.reason
    return out.reason


GENERATOR = """

def batches(images, batch_size, seed):
    rng = np.random.default_rng(seed)
    for start in range(0, len(images), batch_size):
        yield np.stack([preprocess(images[i], rng) for i in range(start, start + batch_size)])
"""


# -- the codemod ---------------------------------------------------------------------------------------------
def test_the_deterministic_decode_moves_into_a_memoized_prefix_and_augmentation_stays() -> None:
    before = (
        d("""
        import numpy as np

        SIZE = 8


        # per-example work
        def preprocess(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            \"\"\"Decode, then augment.\"\"\"
            x = image.astype(np.float32) / 255.0  # to float
            padded = np.pad(x, ((1, 1), (1, 1), (0, 0)), mode="edge")
            smooth = np.zeros_like(x)
            for dy in range(3):
                smooth += padded[dy : dy + SIZE]
            x = 0.5 * x + smooth / 6.0
            # augmentation
            x = x * rng.uniform(0.8, 1.2)
            padded = np.pad(x, 2)
            return padded[:SIZE]
        """)
        + GENERATOR
    )
    after = (
        d("""
        import numpy as np


        {helper}


        SIZE = 8


        @tfdoctor_memoize
        def _preprocess_prefix(image: np.ndarray):
            \"\"\"Added by tfdoctor (generator-cache): the start of preprocess(), cached per input.\"\"\"
            x = image.astype(np.float32) / 255.0  # to float
            padded = np.pad(x, ((1, 1), (1, 1), (0, 0)), mode="edge")
            smooth = np.zeros_like(x)
            for dy in range(3):
                smooth += padded[dy : dy + SIZE]
            x = 0.5 * x + smooth / 6.0
            return x


        # per-example work
        def preprocess(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            \"\"\"Decode, then augment.\"\"\"
            x = _preprocess_prefix(image)
            # augmentation
            x = x * rng.uniform(0.8, 1.2)
            padded = np.pad(x, 2)
            return padded[:SIZE]
        """)
        + GENERATOR
    )
    out = apply(before)
    assert out.status == "changed", out.reason
    assert out.code == d(after).replace("{helper}", helper_code())
    ast.parse(out.code)
    assert out.reason.startswith("preprocess() lines 9-14 cached as _preprocess_prefix() → x")
    assert "1 GiB" in out.reason
    what = next(w for w in out.warnings if w.startswith("preprocess() lines 9-14"))
    assert "_preprocess_prefix(image)" in what and "reads x from it" in what and "up to 1 GiB" in what
    advice = next(iter(out.advice))
    assert "second pass over the data" in advice and "bytes of x per example" in advice


def test_a_function_pure_throughout_is_decorated_itself() -> None:
    before = """
        import numpy as np
        import math


        def decode(image):
            x = image.astype(np.float32) / 255.0
            x = np.pad(x, 1)
            return np.sqrt(x)[1:-1, 1:-1] * math.pi


        def augment(x, rng):
            return x * rng.uniform()


        def batches(images, rng):
            for i in range(len(images)):
                yield augment(decode(images[i]), rng)
        """
    out = apply(before)
    assert out.status == "changed", out.reason
    assert "\n@tfdoctor_memoize\ndef decode(image):\n    x = image.astype" in out.code
    assert "_prefix" not in out.code
    assert "def augment(x, rng):\n    return x * rng.uniform()" in out.code
    assert out.reason.startswith("decode() (lines 5-8) cached whole")
    assert any("not cached: augment()" in w and "random source rng" in w for w in out.warnings)


def test_a_function_called_from_getitem_is_cached_too() -> None:
    out = apply(
        """
        import numpy as np


        def decode(image):
            return np.sqrt(np.abs(np.fft.fft(image.astype(np.float64)))).astype(np.float32)


        class Images:
            def __getitem__(self, i):
                return decode(self.images[i])
        """
    )
    assert out.status == "changed", out.reason
    assert "@tfdoctor_memoize\ndef decode(image):" in out.code


def test_naive_loop_example_caches_the_float_conversion_and_the_smoothing_loop() -> None:
    src = (EXAMPLES / "naive_loop.py").read_text()
    out = get_fix("generator-cache").apply(src, FixContext(filename="naive_loop.py"))
    assert out.status == "changed", out.reason
    tree = ast.parse(out.code)
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    prefix = ast.unparse(fns["_preprocess_prefix"])
    assert [ast.unparse(dec) for dec in fns["_preprocess_prefix"].decorator_list] == ["tfdoctor_memoize"]
    assert [a.arg for a in fns["_preprocess_prefix"].args.args] == ["image"]
    for line in (
        "x = image.astype(np.float32) / 255.0",
        "smooth = np.zeros_like(x)",
        "for dy in range(5):",
        "smooth += padded[dy:dy + IMAGE_SIZE, dx:dx + IMAGE_SIZE]",
        "x = 0.5 * x + 0.5 * smooth / 25.0",
        "return x",
    ):
        assert line in prefix, line
    assert "rng" not in prefix
    body = ast.unparse(fns["preprocess"])
    assert "x = _preprocess_prefix(image)" in body and "rng.uniform" in body and "smooth +=" not in body
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert names.index("tfdoctor_memoize") < names.index("_preprocess_prefix") < names.index("preprocess")
    # every line of the script is still there, verbatim; the only new lines are these and blank ones
    old, new = Counter(src.splitlines()), Counter(out.code.splitlines())
    assert not old - new
    added = new - old - Counter(helper_code().splitlines())
    assert {ln for ln in added if ln.strip()} == {
        "@tfdoctor_memoize",
        "def _preprocess_prefix(image: np.ndarray):",
        '    """Added by tfdoctor (generator-cache): the start of preprocess(), cached per input."""',
        "    return x",
        "    x = _preprocess_prefix(image)",
    }


def test_after_generator_prefetch_the_cache_is_still_added_and_only_once() -> None:
    src = (EXAMPLES / "naive_loop.py").read_text()
    prefetched = get_fix("generator-prefetch").apply(src, FixContext()).code
    out = get_fix("generator-cache").apply(prefetched, FixContext())
    assert out.status == "changed", out.reason
    assert "tfdoctor_prefetch(batches(" in out.code and "x = _preprocess_prefix(image)" in out.code
    ast.parse(out.code)
    again = get_fix("generator-cache").apply(out.code, FixContext())
    assert again.status == "skipped" and "already uses tfdoctor's cache" in again.reason


def test_the_helper_goes_where_generator_prefetch_puts_its_own() -> None:
    src = d(
        '''
        """doc"""
        from __future__ import annotations

        import numpy as np

        try:
            import scipy
        except ImportError:
            scipy = None
        # constants
        SIZE = 3
        '''
    )
    assert imports_end(cst.parse_module(src).body) == 3  # the try/except assigns: not an import block
    naive = (EXAMPLES / "naive_loop.py").read_text()
    ours = get_fix("generator-cache").apply(naive, FixContext()).code
    theirs = get_fix("generator-prefetch").apply(naive, FixContext()).code
    head = naive[: naive.index("IMAGE_SIZE = 32")]
    assert ours.startswith(head.rstrip("\n") + "\n\n\ndef tfdoctor_memoize(")
    assert theirs.startswith(head.rstrip("\n") + "\n\n\ndef tfdoctor_prefetch(")


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            """
            x = image.astype(np.float32) * rng.uniform()
            y = np.pad(x, 2)
            return np.sqrt(np.abs(y))
            """,
            "its first statement reads the random source rng",
        ),
        (
            """
            x = load(image)
            y = np.pad(x, 2)
            return np.sqrt(y) * rng.uniform()
            """,
            "its first statement calls load(), a function of the script",
        ),
        (
            """
            image[...] = 0
            x = np.sqrt(np.pad(image.astype(np.float32), 2))
            return np.abs(x) * rng.uniform()
            """,
            "its first statement changes the parameter image in place",
        ),
        (
            """
            image += 1
            x = np.sqrt(np.pad(image.astype(np.float32), 2))
            return np.abs(x) * rng.uniform()
            """,
            "its first statement changes the parameter image in place",
        ),
        (
            """
            x = image
            x *= 2
            y = np.sqrt(np.pad(x.astype(np.float32), 2))
            return np.abs(y) * rng.uniform()
            """,
            "changes x in place, which may share memory with a parameter or a global",
        ),
        (
            """
            x = image.astype(np.float32)
            return x * rng.uniform()
            """,
            "too small to be worth caching (1 call, no loop",
        ),
        (
            """
            x = np.asarray(image).reshape(-1)
            y = np.sqrt(x)
            z = np.abs(y)
            return x * rng.uniform()
            """,
            "x may share memory with a parameter or a global",
        ),
        (
            """
            if image.ndim == 2:
                image = image[..., None]
            return np.sqrt(np.abs(np.pad(image, 2))) * rng.uniform()
            """,
            "its first statement is an if statement",
        ),
        (
            """
            x = np.add(image, 1.0, np.empty(image.shape))
            y = np.sqrt(np.pad(x, 2))
            return y * rng.uniform()
            """,
            "calls numpy.add with an output argument",
        ),
        (
            """
            x = np.random.normal(size=image.shape) + image
            y = np.sqrt(np.pad(x, 2))
            return y * rng.uniform()
            """,
            "calls numpy.random.normal",
        ),
    ],
)
def test_functions_without_a_provably_deterministic_start_are_left_alone(body: str, why: str) -> None:
    src = (
        "import numpy as np\n\n\ndef load(image):\n    return image\n\n\ndef preprocess(image, rng):\n"
        + textwrap.indent(d(body), "    ")
        + d(GENERATOR)
    )
    out = get_fix("generator-cache").apply(src, FixContext())
    assert out.status == "skipped", out.reason
    assert out.code == src
    assert why in out.reason, out.reason


def test_a_mutable_global_that_the_script_changes_is_not_a_constant() -> None:
    assert_skipped(
        d("""
        import numpy as np

        KERNEL = np.ones(3)


        def preprocess(image, rng):
            x = np.convolve(image, KERNEL)
            y = np.sqrt(np.abs(x))
            z = np.pad(y, 1)
            return z * rng.uniform()


        def main():
            KERNEL[0] = 2.0
        """)
        + GENERATOR,
        "reads KERNEL is changed in place somewhere in the script",
    )


def test_no_generator_and_unparsable_code_are_skipped_with_a_reason() -> None:
    assert_skipped(
        """
        import numpy as np

        def decode(image):
            return np.sqrt(np.abs(np.pad(image, 2)))

        print(decode(np.ones(3)))
        """,
        "no Python generator function",
    )
    assert_skipped(
        """
        def numbers():
            yield 1
        """,
        "call no function of the script",
    )
    out = get_fix("generator-cache").apply("def broken(:\n    pass\n", FixContext())
    assert out.status == "skipped" and "cannot parse" in out.reason


# -- the code it writes, executed ----------------------------------------------------------------------------
def _load(code: str, keep: set[str]) -> dict[str, Any]:
    """The script's numpy part (its imports of numpy, constants and the named functions), executed."""
    tree = ast.parse(code)
    nodes = [
        n
        for n in tree.body
        if (isinstance(n, ast.Import) and n.names[0].name == "numpy")
        or (isinstance(n, ast.Assign))
        or (isinstance(n, ast.FunctionDef) and n.name in keep)
    ]
    ns: dict[str, Any] = {}
    exec(compile(ast.Module(nodes, []), "script", "exec"), ns)
    return ns


def _memoize(**kw: Any) -> Any:
    ns: dict[str, Any] = {}
    exec(helper_code(), ns)
    return ns["tfdoctor_memoize"]


@pytest.fixture(scope="module")
def naive() -> tuple[dict[str, Any], dict[str, Any]]:
    src = (EXAMPLES / "naive_loop.py").read_text()
    new = get_fix("generator-cache").apply(src, FixContext()).code
    fns = {"make_images", "preprocess", "batches", "tfdoctor_memoize", "_preprocess_prefix"}
    return _load(src, fns), _load(new, fns)


def test_transformed_naive_loop_gives_the_same_batches_bit_for_bit_and_hits_from_the_second_epoch(
    naive: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    before, after = naive
    images, labels = before["make_images"](96)
    memo = after["_preprocess_prefix"].tfdoctor_memo
    for epoch in range(2):
        start = dict(memo)
        got = list(after["batches"](images, labels, 16, seed=epoch))
        want = list(before["batches"](images, labels, 16, seed=epoch))
        assert len(got) == len(want) == 6
        for (gx, gy), (wx, wy) in zip(got, want, strict=True):
            assert gx.dtype == wx.dtype == np.float32 and gx.shape == wx.shape
            assert np.array_equal(gx, wx) and np.array_equal(gy, wy)
            assert gx.tobytes() == wx.tobytes()  # bit for bit, not just close
        if epoch == 0:
            assert (memo["misses"] - start["misses"], memo["hits"] - start["hits"]) == (96, 0)
        else:
            assert (memo["misses"] - start["misses"], memo["hits"] - start["hits"]) == (0, 96)
    assert memo["bypass"] == 0 and memo["full"] is False
    assert memo["bytes"] == 96 * 32 * 32 * 3 * 4
    assert all(type(memo[k]) is int for k in ("hits", "misses", "bypass", "bytes"))


def test_changing_a_returned_array_does_not_change_the_next_result(
    naive: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    before, after = naive
    images, _ = before["make_images"](4, seed=1)
    prefix = after["_preprocess_prefix"]
    first = prefix(images[0])
    want = first.copy()
    first[...] = 7.0
    again = prefix(images[0])
    assert np.array_equal(again, want) and again is not first
    again += 1.0
    assert np.array_equal(prefix(images[0]), want)
    assert np.shares_memory(prefix(images[0]), prefix(images[0])) is False


def test_the_cache_keys_on_content_not_identity() -> None:
    calls: list[object] = []

    def f(a: Any, scale: float = 1.0) -> Any:
        calls.append(a)
        return np.asarray(a, dtype=np.float64) * scale

    cached = _memoize()(f)
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    cached(a)
    cached(a.copy())  # same content: hit
    cached(np.asfortranarray(a))  # same values, other layout: hit
    cached(a.astype(np.int64))  # other dtype: miss
    cached(a.reshape(3, 2))  # other shape: miss
    b = a.copy()
    b[0, 0] = 99
    cached(b)  # other bytes: miss
    cached(a, scale=2.0)  # other keyword: miss
    cached(a, scale=2.0)
    assert cached.tfdoctor_memo["hits"] == 3 and cached.tfdoctor_memo["misses"] == 5
    assert len(calls) == 5
    memo = cached.tfdoctor_memo
    for first, second, hit in [
        (0.0, -0.0, False),  # a different float, though equal
        (float("nan"), float("nan"), True),  # nan is keyed, though unequal
        ((1, 2), [1, 2], False),  # a list is not the tuple
        (1, True, False),  # nor is True the int 1
        (2.5, 2.5, True),
    ]:
        hits = memo["hits"]
        cached(first)
        cached(second)
        assert memo["hits"] - hits == int(hit), (first, second)


def test_arguments_it_cannot_key_and_results_it_cannot_copy_are_passed_through() -> None:
    class Box:
        pass

    cached = _memoize()(lambda a: {"value": a})
    assert cached(3) == {"value": 3} and cached(3) == {"value": 3}  # a dict result: not stored
    box = Box()
    identity = _memoize()(lambda a: a)
    assert identity(box) is box  # an object argument: called through
    assert identity({"k": 1}) == {"k": 1}
    assert identity(np.array([object()], dtype=object)).dtype == object
    assert cached.tfdoctor_memo == {"hits": 0, "misses": 0, "bypass": 2, "bytes": 0, "full": False}
    assert identity.tfdoctor_memo["bypass"] == 3 and identity.tfdoctor_memo["misses"] == 0


def test_the_memory_cap_stops_adding_and_keeps_serving() -> None:
    def f(i: int) -> np.ndarray:
        return np.full(100, i, dtype=np.float64)  # 800 bytes

    ns: dict[str, Any] = {}
    exec(helper_code(), ns)
    cached = ns["tfdoctor_memoize"](f, max_bytes=2500)
    for i in range(5):
        assert np.array_equal(cached(i), f(i))
    memo = cached.tfdoctor_memo
    assert memo["full"] is True and memo["bytes"] == 2400 and memo["misses"] == 5
    for i in range(5):
        assert np.array_equal(cached(i), f(i))
    assert memo["hits"] == 3 and memo["misses"] == 7 and memo["bytes"] == 2400


def test_tuples_of_arrays_are_copied_element_by_element() -> None:
    cached = _memoize()(lambda a: (a * 2, [a + 1, 3]))
    x, (y, _) = cached(np.ones(3))
    x[:] = 0
    y[:] = 0
    x2, (y2, n2) = cached(np.ones(3))
    assert np.array_equal(x2, np.full(3, 2.0)) and np.array_equal(y2, np.full(3, 2.0)) and n2 == 3
    assert cached.tfdoctor_memo["hits"] == 1 and cached.tfdoctor_memo["bytes"] == 48


def test_counts_add_up_when_two_threads_call_it() -> None:
    cached = _memoize()(lambda i: np.full(64, i))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                for i in range(200):
                    assert cached(i)[0] == i
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    memo = cached.tfdoctor_memo
    assert not errors
    assert memo["hits"] + memo["misses"] == 1200 and memo["bypass"] == 0
    assert 200 <= memo["misses"] <= 400 and memo["bytes"] == 200 * 64 * 8


def test_input_stall_names_generator_cache_next_to_generator_prefetch_on_a_generator_trace() -> None:
    from tfdoctor.rules import FIX_IDS, get_rule
    from tfdoctor.rules._examples import run_example

    rule = get_rule("TFD101")
    ex = next(e for e in rule.EXAMPLES if e.path.endswith("rules-input-generator"))
    (finding,) = run_example(rule, ex)
    assert "Python generator" in finding.claim
    ids = list(finding.fix_ids)
    assert ids.index("generator-prefetch") + 1 == ids.index("generator-cache")
    assert "generator-cache" in FIX_IDS
    well_fed = next(e for e in rule.EXAMPLES if e.path.endswith("rules-input-sequential-map"))
    assert all("generator-cache" not in f.fix_ids for f in run_example(rule, well_fed))


# -- methods (issue 13): Trainer.batches() calling self.preprocess() ---------------------------------------
CORPUS = EXAMPLES / "corpus"

#: what the numpy part of class_trainer.py's Trainer needs, without Keras: the data and the random source
FAKE_INIT = """
def __init__(self, images, labels, batch_size=8, seed=0):
    self.images = images
    self.labels = labels
    self.batch_size = batch_size
    self.rng = np.random.default_rng(seed)
    self.mean = np.array([0.5, 0.5, 0.5], dtype=np.float32)
    self.std = np.array([0.25, 0.25, 0.25], dtype=np.float32)
"""


def _fake_trainer(code: str, methods: tuple[str, ...] = ("preprocess", "batches")) -> dict[str, Any]:
    """class_trainer.py's module-level numpy part and a class ``Fake`` with Trainer's named methods
    (as the code has them) and a Keras-free ``__init__``, executed."""
    tree = ast.parse(code)
    trainer = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Trainer")
    keep = [n for n in trainer.body if isinstance(n, ast.FunctionDef) and n.name in methods]
    fake = ast.ClassDef("Fake", [], [], [ast.parse(FAKE_INIT).body[0], *keep], [], type_params=[])
    nodes = [
        n
        for n in tree.body
        if (isinstance(n, ast.Import) and n.names[0].name == "numpy")
        or isinstance(n, ast.Assign)
        or (
            isinstance(n, ast.FunctionDef)
            and (n.name == "make_dataset" or n.name.startswith(("_", "tfdoctor")))
        )
    ]
    ns: dict[str, Any] = {}
    exec(compile(ast.fix_missing_locations(ast.Module([*nodes, fake], [])), "class_trainer", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def trainer() -> tuple[str, Any]:
    src = (CORPUS / "class_trainer.py").read_text()
    return src, get_fix("generator-cache").apply(src, FixContext(filename="class_trainer.py"))


def test_class_trainer_preprocess_prefix_moves_to_module_level_with_self_attributes_as_arguments(
    trainer: tuple[str, Any],
) -> None:
    src, out = trainer
    assert out.status == "changed", out.reason
    assert out.reason.startswith(
        "Trainer.preprocess() lines 63-65 cached as _Trainer_preprocess_prefix() → padded"
    )
    (what,) = out.warnings
    assert "moved into _Trainer_preprocess_prefix(image, self.mean, self.std)" in what
    assert "self.mean, self.std are passed in, so the cache keys on their content" in what
    prefix = d('''
        @tfdoctor_memoize
        def _Trainer_preprocess_prefix(image, self_mean, self_std):
            """Added by tfdoctor (generator-cache): the start of Trainer.preprocess(), cached per input."""
            x = image.astype(np.float32) / 255.0
            x = (x - self_mean) / self_std
            padded = np.pad(x, ((4, 4), (4, 4), (0, 0)), mode="reflect")
            return padded


        class Trainer:
        ''')
    assert prefix in out.code
    method = d("""
        def preprocess(self, image):
            padded = _Trainer_preprocess_prefix(image, self.mean, self.std)
            top, left = self.rng.integers(0, 9, size=2)
        """)
    assert textwrap.indent(method, "    ") in out.code
    ast.parse(out.code)
    # every other line is unchanged
    old, new = Counter(src.splitlines()), Counter(out.code.splitlines())
    gone = old - new
    assert {ln.strip() for ln in gone} == {
        "x = image.astype(np.float32) / 255.0",
        "x = (x - self.mean) / self.std",
        'padded = np.pad(x, ((4, 4), (4, 4), (0, 0)), mode="reflect")',
    }


def test_class_trainer_batches_are_bit_identical_cold_and_warm_and_hit_from_the_second_epoch(
    trainer: tuple[str, Any],
) -> None:
    src, out = trainer
    before, after = _fake_trainer(src), _fake_trainer(out.code)
    images, labels = before["make_dataset"](48, seed=3)
    memo = after["_Trainer_preprocess_prefix"].tfdoctor_memo
    t_before, t_after = before["Fake"](images, labels), after["Fake"](images, labels)
    for epoch in range(2):
        start = dict(memo)
        got, want = list(t_after.batches()), list(t_before.batches())
        assert len(got) == len(want) == 6
        for (gx, gy), (wx, wy) in zip(got, want, strict=True):
            assert gx.dtype == wx.dtype == np.float32 and gx.shape == wx.shape == (8, 32, 32, 3)
            assert gx.tobytes() == wx.tobytes() and np.array_equal(gy, wy)
        # the method's random draws happen as before: the generators stay in step
        assert t_after.rng.bit_generator.state == t_before.rng.bit_generator.state
        hits, misses = memo["hits"] - start["hits"], memo["misses"] - start["misses"]
        assert (hits, misses) == ((0, 48) if epoch == 0 else (48, 0)), epoch
    assert memo["bytes"] == 48 * 40 * 40 * 3 * 4 and memo["bypass"] == 0


def test_a_changed_attribute_misses_instead_of_serving_a_stale_result(trainer: tuple[str, Any]) -> None:
    src, out = trainer
    before, after = _fake_trainer(src), _fake_trainer(out.code)
    images, labels = before["make_dataset"](4, seed=4)
    memo = after["_Trainer_preprocess_prefix"].tfdoctor_memo
    t_before, t_after = before["Fake"](images, labels), after["Fake"](images, labels)

    def same() -> None:
        got, want = t_after.preprocess(images[0]), t_before.preprocess(images[0])
        assert got.tobytes() == want.tobytes()

    same()
    same()
    assert (memo["hits"], memo["misses"]) == (1, 1)
    for change in (
        lambda t: setattr(t, "mean", t.mean + np.float32(0.125)),  # rebound
        lambda t: t.std.__setitem__(0, np.float32(0.5)),  # changed in place: same object, new content
        lambda t: setattr(t, "std", t.std.astype(np.float64)),  # same values, another dtype
    ):
        change(t_after)
        change(t_before)
        same()
        assert (memo["hits"], memo["misses"]) == (1, 2), "a changed attribute must miss"
        same()
        assert (memo["hits"], memo["misses"]) == (2, 2)
        memo["hits"], memo["misses"] = 1, 1


def test_the_prefix_of_a_method_is_found_by_the_harness_memo_scanner(trainer: tuple[str, Any]) -> None:
    from tfdoctor.capture.child.clock import MemoScanner

    _, out = trainer
    ns = _fake_trainer(out.code)
    images, labels = ns["make_dataset"](8, seed=5)
    scanner = MemoScanner(lambda: ns)
    fake = ns["Fake"](images, labels)
    for _ in range(2):
        list(fake.batches())
    stats = scanner()
    assert stats is not None and stats.caches == 1
    assert (stats.hits, stats.misses, stats.full) == (8, 8, False)
    assert scanner.found == [ns["_Trainer_preprocess_prefix"]]


METHOD_HEAD = """
import numpy as np


class Trainer:
    scale = 2.0

    def __init__(self, images, seed):
        self.images = images
        self.rng = np.random.default_rng(seed)
        self.gen = np.random.default_rng(seed + 1)
        self.mean = np.float32(0.5)
        self.lut = np.arange(256, dtype=np.float32)

    @property
    def shift(self):
        return 1.0

    def other(self, x):
        return x

    def batches(self):
        for i in range(len(self.images)):
            yield self.preprocess(self.images[i], i)

    def preprocess(self, image, i):
"""


@pytest.mark.parametrize(
    ("first", "why"),
    [
        ("x = image * self.rng.uniform()", "its first statement reads the random source self.rng"),
        (
            "x = image * self.gen.random()",
            "reads the random source self.gen (assigned np.random.default_rng(...))",
        ),
        ("x = self.other(image)", "its first statement calls self.other(), a method of Trainer"),
        ("x = np.asarray(self)", "its first statement reads self whole"),
        ("x = image * self.shift", "reads self.shift, a method or property of Trainer"),
        ("x = image * self.missing", "reads self.missing, which Trainer never assigns"),
        ("x = self.images[i] * 1.0", "indexes self.images by a parameter"),
        ("self.mean = np.float32(1.0)", "changes the parameter self in place"),
    ],
)
def test_a_method_prefix_ends_at_random_attributes_self_whole_and_what_it_cannot_follow(
    first: str, why: str
) -> None:
    src = METHOD_HEAD + textwrap.indent(
        d(f"""
        {first}
        y = np.pad(image.astype(np.float32), 2) - self.mean
        z = np.sqrt(np.abs(y)) * self.scale
        return z * self.rng.uniform()
        """),
        "        ",
    )
    out = get_fix("generator-cache").apply(src, FixContext())
    assert out.status == "skipped", out.reason
    assert out.code == src
    assert out.reason.startswith("Trainer.preprocess(): nothing deterministic to cache"), out.reason
    assert why in out.reason, out.reason


def test_a_class_attribute_and_a_constant_index_are_passed_as_arguments() -> None:
    src = METHOD_HEAD + textwrap.indent(
        d("""
        y = np.pad(image.astype(np.float32), 2) - self.mean + self.lut[0]
        z = np.sqrt(np.abs(y)) * self.scale
        return z * self.rng.uniform()
        """),
        "        ",
    )
    out = get_fix("generator-cache").apply(src, FixContext())
    assert out.status == "changed", out.reason
    assert "def _Trainer_preprocess_prefix(image, self_mean, self_lut, self_scale):" in out.code
    assert "z = _Trainer_preprocess_prefix(image, self.mean, self.lut, self.scale)" in out.code
    assert "y = np.pad(image.astype(np.float32), 2) - self_mean + self_lut[0]" in out.code


def test_a_getattr_class_and_a_decorated_method_are_left_alone() -> None:
    body = textwrap.indent(
        d("""
        y = np.pad(image.astype(np.float32), 2) - self.mean
        z = np.sqrt(np.abs(y))
        return z * self.rng.uniform()
        """),
        "        ",
    )
    dynamic = METHOD_HEAD.replace(
        "    def other(", "    def __getattr__(self, name):\n        return 0\n\n    def other("
    )
    assert_skipped(dynamic + body, "(Trainer defines __getattr__: tfdoctor cannot tell what it reads)")
    static = (METHOD_HEAD + body).replace(
        "    def preprocess(self, image, i):", "    @staticmethod\n    def preprocess(self, image, i):"
    )
    assert_skipped(static, "Trainer.preprocess() is decorated")


def test_a_method_split_and_one_pure_throughout_get_prefixes_above_the_class_and_compute_the_same() -> None:
    src = d('''
        import numpy as np

        SIZE = 6


        # the trainer
        class Trainer:
            """Batches of images."""

            def __init__(self, images, seed):
                self.images = images
                self.rng = np.random.default_rng(seed)
                self.kernel = np.ones(3, dtype=np.float32) / 3

            def decode(self, image):
                x = image.astype(np.float32) / 255.0
                x = np.pad(x, 1, mode="edge")
                return np.sqrt(x + 1.0)[1:-1, 1:-1] * 2.0

            def preprocess(self, image):
                y = np.zeros(image.shape, dtype=np.float32)
                for k in range(3):
                    y += np.roll(image, k - 1, axis=0) * self.kernel[k]
                x = self.decode(y)
                return x * self.rng.uniform(0.5, 1.5)

            def batches(self, n):
                for i in range(0, len(self.images), n):
                    yield np.stack([self.preprocess(im) for im in self.images[i : i + n]])
        ''')
    out = apply(src)
    assert out.status == "changed", out.reason
    assert out.reason.startswith(
        "Trainer.preprocess() lines 21-23 cached as _Trainer_preprocess_prefix() → y; "
        "Trainer.decode() lines 16-18 cached whole as _Trainer_decode_prefix()"
    )
    assert "y = _Trainer_preprocess_prefix(image, self.kernel)\n        x = self.decode(y)" in out.code
    assert "def _Trainer_preprocess_prefix(image, self_kernel):" in out.code
    code = out.code
    assert "    def decode(self, image):\n        return _Trainer_decode_prefix(image)\n" in code
    i_pre, i_cls = code.index("def _Trainer_decode_prefix(image):"), code.index("class Trainer:")
    assert i_pre < i_cls and code[i_cls - len("# the trainer\n") - 2 : i_cls] == "\n\n# the trainer\n"
    ns_before: dict[str, Any] = {}
    ns_after: dict[str, Any] = {}
    exec(src, ns_before)
    exec(code, ns_after)
    images = np.random.default_rng(0).integers(0, 255, size=(10, 6, 6), dtype=np.uint8)
    for epoch in range(2):
        got = list(ns_after["Trainer"](images, epoch).batches(4))
        want = list(ns_before["Trainer"](images, epoch).batches(4))
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    memo = ns_after["_Trainer_decode_prefix"].tfdoctor_memo
    assert (memo["hits"], memo["misses"]) == (10, 10)


# -- generators nested in a function -------------------------------------------------------------------------
NESTED = """
import numpy as np

SIZE = 8


def decode(image):
    x = image.astype(np.float32) / 255.0
    x = np.pad(x, 2, mode="reflect")
    return np.sqrt(x)[2:-2, 2:-2] + 1.0


def main(images, seed):
    rng = np.random.default_rng(seed)
    scale = 2.0

    def augment(image):
        x = image.astype(np.float64) - 128.0
        y = np.abs(np.fft.fft(x, axis=0))
        z = np.log1p(y) / 10.0
        return z * rng.uniform()

    def batches(n):
        for i in range(0, len(images), n):
            yield np.stack([{call} for im in images[i : i + n]])

    return [b for _ in range(2) for b in batches(4)]
"""


def _run_nested(code: str, images: np.ndarray) -> tuple[list[np.ndarray], dict[str, Any]]:
    ns: dict[str, Any] = {}
    exec(code, ns)
    return ns["main"](images, 0), ns


def test_a_nested_generator_caches_the_module_level_function_it_calls() -> None:
    src = d(NESTED).replace("{call}", "decode(im) * rng.uniform()")
    out = apply(src)
    assert out.status == "changed", out.reason
    assert out.reason.startswith("decode() (lines 6-9) cached whole")
    images = np.random.default_rng(1).integers(0, 255, size=(8, 8, 8), dtype=np.uint8)
    want, _ = _run_nested(src, images)
    got, ns = _run_nested(out.code, images)
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    assert (ns["decode"].tfdoctor_memo["hits"], ns["decode"].tfdoctor_memo["misses"]) == (8, 8)


def test_a_function_nested_beside_the_generator_gets_a_module_level_prefix() -> None:
    src = d(NESTED).replace("{call}", "augment(im)")
    out = apply(src)
    assert out.status == "changed", out.reason
    assert out.reason.startswith("main.<locals>.augment() lines 17-19 cached as _main_augment_prefix() → z")
    assert "def _main_augment_prefix(image):" in out.code
    assert out.code.index("def _main_augment_prefix(") < out.code.index("def main(")
    assert "        z = _main_augment_prefix(image)\n        return z * rng.uniform()" in out.code
    images = np.random.default_rng(2).integers(0, 255, size=(8, 8, 8), dtype=np.uint8)
    want, _ = _run_nested(src, images)
    got, ns = _run_nested(out.code, images)
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    memo = ns["_main_augment_prefix"].tfdoctor_memo
    assert (memo["hits"], memo["misses"]) == (8, 8)


def test_a_nested_function_reading_a_name_of_the_enclosing_function_is_left_alone() -> None:
    src = (
        d(NESTED)
        .replace("{call}", "augment(im)")
        .replace("x = image.astype(np.float64) - 128.0", "x = image.astype(np.float64) * scale")
    )
    assert_skipped(
        src,
        "main.<locals>.augment(): nothing deterministic to cache: its first statement reads scale, a name of "
        "the enclosing function main()",
    )
