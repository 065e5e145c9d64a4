"""Each fix's codemod: before/after on dedented sources, an unchanged case, and code it cannot parse or
find its pattern in (skipped with a reason). No TensorFlow is imported: these are source transforms."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tfdoctor.fixes import FixContext, FixOutcome, Hardware, all_fixes, get_fix
from tfdoctor.model import Facts, HostCall, KerasBatchCall

SHAPES = Path(__file__).resolve().parents[1] / "data" / "shapes"

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def d(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def apply(fix_id: str, before: str, **ctx: object) -> tuple[str, str, tuple[str, ...], str]:
    out = get_fix(fix_id).apply(d(before), FixContext(**ctx))  # type: ignore[arg-type]
    return out.status, out.code, out.warnings, out.reason


def outcome(fix_id: str, before: str, **ctx: object) -> FixOutcome:
    return get_fix(fix_id).apply(d(before), FixContext(**ctx))  # type: ignore[arg-type]


def assert_codemod(fix_id: str, before: str, after: str, **ctx: object) -> tuple[str, ...]:
    status, code, warnings, reason = apply(fix_id, before, **ctx)
    assert status == "changed", reason
    assert code == d(after)
    ast.parse(code)
    return warnings


def assert_skipped(fix_id: str, before: str, why: str, **ctx: object) -> None:
    status, code, _, reason = apply(fix_id, before, **ctx)
    assert status == "skipped", reason
    assert code == d(before)
    assert why in reason, reason


# -- every fix ---------------------------------------------------------------------------------
def test_the_registry_has_every_fix_id_the_rules_use() -> None:
    from tfdoctor.rules import FIX_IDS

    ids = [f.ID for f in all_fixes()]
    assert set(ids) >= FIX_IDS, FIX_IDS - set(ids)  # a fix no rule names is still tried (all are candidates)
    assert len(ids) == len(set(ids))
    for f in all_fixes():
        assert f.DESCRIPTION and (f.__doc__ or "").strip(), f.ID
        assert set(f.AFTER) <= set(ids), f.ID


ALL_PRECHECKS = Facts(
    debug_switches=["tf.debugging.enable_check_numerics() at train.py:1"],
    keras_batch_calls=[
        KerasBatchCall(api="predict", site="train.py:1", code="q = model.predict(s)", calls=1, rows=1)
    ],
    host_calls=[
        HostCall(api="set_weights", site="train.py:1", code="t.set_weights(w)", calls=1, timed_steps=1)
    ],
)


@pytest.mark.parametrize("fix_id", sorted(f.ID for f in all_fixes()))
def test_unparsable_code_is_skipped_with_the_parser_error(fix_id: str) -> None:
    # facts that pass every precheck (debug-switches wants a switch seen on, keras-on-batch a call)
    facts = ALL_PRECHECKS
    ctx = FixContext(hardware=Hardware(cpu_bf16=True), facts=facts)
    out = get_fix(fix_id).apply("def broken(:\n    pass\n", ctx)
    assert out.status == "skipped"
    assert "cannot parse" in out.reason and out.code == "def broken(:\n    pass\n"


@pytest.mark.parametrize("fix_id", sorted(f.ID for f in all_fixes()))
def test_code_without_any_pattern_is_skipped_with_a_reason(fix_id: str) -> None:
    src = "import numpy as np\n\nprint(np.arange(3).sum())\n"
    facts = ALL_PRECHECKS
    out = get_fix(fix_id).apply(src, FixContext(hardware=Hardware(cpu_bf16=True), facts=facts))
    assert out.status == "skipped" and out.code == src
    assert len(out.reason) > 10


# -- tfdata-parallel-map ---------------------------------------------------------------------------
def test_parallel_map_adds_autotune_to_map_and_interleave_only_on_datasets() -> None:
    assert_codemod(
        "tfdata-parallel-map",
        """
        import tensorflow as tf
        ds = tf.data.Dataset.range(8).map(f).interleave(g, cycle_length=2, deterministic=True)
        ds = ds.map(h, num_parallel_calls=4)
        out = pool.map(f, items)
        """,
        """
        import tensorflow as tf
        ds = tf.data.Dataset.range(8).map(f, num_parallel_calls=tf.data.AUTOTUNE).interleave(g, cycle_length=2, deterministic=True, num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.map(h, num_parallel_calls=4)
        out = pool.map(f, items)
        """,
    )


def test_parallel_map_keeps_a_multiline_call_layout_and_replaces_none() -> None:
    assert_codemod(
        "tfdata-parallel-map",
        """
        import tensorflow as T
        ds = T.data.TFRecordDataset(files)
        ds = ds.map(
            parse,
            deterministic=False,
        )
        other = ds.map(g, num_parallel_calls=None)
        """,
        """
        import tensorflow as T
        ds = T.data.TFRecordDataset(files)
        ds = ds.map(
            parse,
            deterministic=False,
            num_parallel_calls=T.data.AUTOTUNE,
        )
        other = ds.map(g, num_parallel_calls=T.data.AUTOTUNE)
        """,
    )


def test_parallel_map_names_the_line_of_each_map_in_a_chain() -> None:
    src = "import tensorflow as tf\nds = (\n    tf.data.Dataset.range(8)\n    .map(f)\n    .map(g)\n)\n"
    out = get_fix("tfdata-parallel-map").apply(src, FixContext())
    assert out.changed and out.reason.endswith("on 2 map/interleave (line 4, line 5)")


def test_parallel_map_says_the_scripts_own_setting_on_a_helpers_parameter() -> None:
    """TensorFlow's data augmentation tutorial maps ``ds``, a parameter of ``prepare(ds, shuffle=False,
    augment=False)``, with ``num_parallel_calls=AUTOTUNE`` already: the skip said "on a name not known to
    be a tf.data dataset", where the maps set it already."""
    assert_skipped(
        "tfdata-parallel-map",
        """
        import tensorflow as tf
        AUTOTUNE = tf.data.AUTOTUNE


        def prepare(ds, shuffle=False, augment=False):
            ds = ds.map(lambda x, y: (resize(x), y), num_parallel_calls=AUTOTUNE)
            if shuffle:
                ds = ds.shuffle(1000)
            ds = ds.batch(32)
            if augment:
                ds = ds.map(lambda x, y: (aug(x, training=True), y), num_parallel_calls=AUTOTUNE)
            return ds.prefetch(buffer_size=AUTOTUNE)
        """,
        "every tf.data map/interleave already sets num_parallel_calls",
    )


def test_parallel_map_says_when_a_cache_follows_the_map() -> None:
    """A map before the pipeline's own cache() runs in the epoch that fills the cache only (keras-io's
    seq2seq Transformer maps its text vectorization, then returns ``dataset.cache().shuffle(...)``): the
    trial times that epoch, so its gain is said to hold for it; a map after the cache gets no such note."""
    src = d(
        """
        import tensorflow as tf


        def make_dataset(pairs):
            dataset = tf.data.Dataset.from_tensor_slices(pairs)
            dataset = dataset.batch(64)
            dataset = dataset.map(vectorize)
            return dataset.cache().shuffle(2048).prefetch(16)


        other = tf.data.Dataset.range(8).map(f).cache().map(g)
        train_ds = make_dataset(pairs)
        """
    )
    out = get_fix("tfdata-parallel-map").apply(src, FixContext())
    assert out.changed and out.reason.endswith("on 3 map/interleave (line 7, line 11, line 11)")
    (note,) = [w for w in out.warnings if "cache()" in w]
    assert note.startswith(
        "line 7: map() comes before cache() (line 8); line 11: map() comes before cache() (line 11): "
        "the map runs in the epoch that fills the cache"
    ), note
    assert "holds for it only" in note


def test_parallel_map_unchanged_when_every_map_sets_it() -> None:
    assert_skipped(
        "tfdata-parallel-map",
        """
        import tensorflow as tf
        ds = tf.data.Dataset.range(8).map(f, num_parallel_calls=tf.data.AUTOTUNE)
        """,
        "already sets num_parallel_calls",
    )


# -- tfdata-prefetch -------------------------------------------------------------------------------
def test_prefetch_goes_at_the_end_of_the_pipeline_the_loop_iterates() -> None:
    assert_codemod(
        "tfdata-prefetch",
        """
        import tensorflow as tf
        train = (
            tf.data.Dataset.from_tensor_slices((x, y))
            .shuffle(100)
            .batch(32)
        )
        for xb, yb in train.take(10):
            step(xb, yb)
        """,
        """
        import tensorflow as tf
        train = (
            tf.data.Dataset.from_tensor_slices((x, y))
            .shuffle(100)
            .batch(32)
            .prefetch(tf.data.AUTOTUNE)
        )
        for xb, yb in train.take(10):
            step(xb, yb)
        """,
    )


def test_prefetch_uses_the_last_assignment_and_the_fit_input() -> None:
    assert_codemod(
        "tfdata-prefetch",
        """
        import tensorflow as tf
        ds = tf.data.Dataset.from_tensor_slices(x)
        ds = ds.batch(8)
        model.fit(ds, epochs=1)
        """,
        """
        import tensorflow as tf
        ds = tf.data.Dataset.from_tensor_slices(x)
        ds = ds.batch(8).prefetch(tf.data.AUTOTUNE)
        model.fit(ds, epochs=1)
        """,
    )


def test_prefetch_unchanged_when_the_pipeline_prefetches_before_repeat() -> None:
    assert_skipped(
        "tfdata-prefetch",
        """
        import tensorflow as tf
        ds = tf.data.Dataset.range(10).batch(2).prefetch(1).repeat()
        model.fit(ds)
        """,
        "already prefetches",
    )


def test_prefetch_counts_a_zip_of_pipelines_that_each_prefetch_and_extends_one_that_does_not() -> None:
    """keras-io's SimSiam zips two pipelines ending in prefetch(AUTO) and fits on the zip: the work is
    already overlapped (a prefetch after the zip was a trial of a no-op). keras-io's MixUp zips two that do
    not prefetch and maps the pairs: that map's pipeline gets it."""
    two = """
        import tensorflow as tf
        one = tf.data.Dataset.from_tensor_slices(x).map(aug, num_parallel_calls=tf.data.AUTOTUNE).batch(8){p}
        two = tf.data.Dataset.from_tensor_slices(x).map(aug, num_parallel_calls=tf.data.AUTOTUNE).batch(8){p}
        ssl_ds = tf.data.Dataset.zip((one, two))
        model.fit(ssl_ds)
        """
    assert_skipped(
        "tfdata-prefetch",
        two.format(p=".prefetch(tf.data.AUTOTUNE)"),
        "already prefetches (ssl_ds: zip() of one and two, each prefetching)",
    )
    status, code, _, reason = apply("tfdata-prefetch", two.format(p=""))
    assert status == "changed" and "(line 4)" in reason, reason
    assert "ssl_ds = tf.data.Dataset.zip((one, two)).prefetch(tf.data.AUTOTUNE)" in code
    # one of the two prefetching is not enough: the other's work is not overlapped
    half = two.format(p="").replace(".batch(8)\n", ".batch(8).prefetch(2)\n", 1)
    assert half.count(".prefetch(2)") == 1
    assert apply("tfdata-prefetch", half)[0] == "changed"


# -- tfdata-cache ----------------------------------------------------------------------------------
CACHE_BEFORE = """
import tensorflow as tf


def decode(x):
    return tf.cast(x, tf.float32) / 255.0


def augment(x):
    return tf.image.random_flip_left_right(x)


ds = (
    tf.data.Dataset.from_tensor_slices(images)
    .shuffle(1000)
    .map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    .map(augment)
    .batch(32)
)
"""


def test_cache_goes_after_deterministic_maps_and_shuffle_moves_after_it() -> None:
    warnings = assert_codemod(
        "tfdata-cache",
        CACHE_BEFORE,
        CACHE_BEFORE.replace(
            "    .shuffle(1000)\n    .map(decode, num_parallel_calls=tf.data.AUTOTUNE)\n",
            "    .map(decode, num_parallel_calls=tf.data.AUTOTUNE)\n    .cache()\n    .shuffle(1000)\n",
        ),
    )
    assert any("shuffle() moved after cache()" in w for w in warnings)
    assert any("in memory" in w for w in warnings)


def test_cache_skips_random_preprocessing_and_names_the_random_call() -> None:
    assert_skipped(
        "tfdata-cache",
        """
        import tensorflow as tf
        def prep(x):
            return jitter(x)
        def jitter(x):
            return x + tf.random.uniform([])
        ds = tf.data.Dataset.from_tensor_slices(images).map(prep).batch(4)
        """,
        "prep → jitter → tf.random.uniform",
    )


def test_cache_says_when_the_maps_run_inside_a_helper_every_pipeline_goes_through() -> None:
    """TensorFlow's data augmentation tutorial: ``train_ds = prepare(train_ds, shuffle=True, augment=True)``
    and the same for val_ds and test_ds, the resize map inside ``prepare``. The skip said "no tf.data
    pipeline with an in-memory source in the script" while the run's top finding was TFD102 (the same
    preprocessing every epoch): it now says where the maps are and what to do, once for the helper."""
    src = (SHAPES / "data_augmentation.py").read_text()
    out = get_fix("tfdata-cache").apply(src, FixContext())
    assert out.status == "skipped"
    assert out.reason.startswith(
        "train_ds (line 57), val_ds (line 58), test_ds (line 59): the maps run inside prepare() (line 41, "
        "line 51), a helper every pipeline it is given goes through"
    ), out.reason
    assert out.reason.count("prepare()") == 1


def test_cache_skips_file_sources_it_cannot_size() -> None:
    assert_skipped(
        "tfdata-cache",
        """
        import tensorflow as tf
        ds = tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_tensor(r, tf.float32)).batch(4)
        """,
        "cannot tell whether the decoded data fits",
    )


def test_cache_splits_a_map_at_its_first_random_draw_and_caches_the_deterministic_start() -> None:
    """mirrored_ctl.py's shape: preprocess() casts (deterministic), then flips (random); the pipeline
    shuffles first and shards in an earlier assignment."""
    warnings = assert_codemod(
        "tfdata-cache",
        """
        import tensorflow as tf


        def preprocess(image, label):
            image = tf.cast(image, tf.float32)[..., tf.newaxis] / 255.0
            image = tf.image.random_flip_left_right(image)
            return image, label


        def dataset_fn(ctx):
            ds = tf.data.Dataset.from_tensor_slices((images, labels))
            ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
            ds = ds.shuffle(1000).map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).batch(64)
            return ds
        """,
        """
        import tensorflow as tf


        def preprocess_prefix(image, label):
            \"\"\"Added by tfdoctor (tfdata-cache): the deterministic start of preprocess(), before the cache.\"\"\"
            image = tf.cast(image, tf.float32)[..., tf.newaxis] / 255.0
            return image, label


        def preprocess_rest(image, label):
            \"\"\"Added by tfdoctor (tfdata-cache): the rest of preprocess(), after the cache (every epoch).\"\"\"
            image = tf.image.random_flip_left_right(image)
            return image, label


        def dataset_fn(ctx):
            ds = tf.data.Dataset.from_tensor_slices((images, labels))
            ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
            ds = ds.map(preprocess_prefix, num_parallel_calls=tf.data.AUTOTUNE).cache().shuffle(1000).map(preprocess_rest, num_parallel_calls=tf.data.AUTOTUNE).batch(64)
            return ds
        """,
    )
    split = next(w for w in warnings if "split in two" in w)
    assert "preprocess_prefix() runs line 5" in split and "tf.image.random_flip_left_right" in split
    assert any("shuffle() moved after cache()" in w and "element-wise" in w for w in warnings)


def test_a_split_function_used_elsewhere_is_kept_and_the_rest_takes_what_it_reads() -> None:
    """The rest reads a local of the start and a parameter the start never touched, in its own order;
    preprocess stays for its other use."""
    out = outcome(
        "tfdata-cache",
        """
        import tensorflow as tf


        def preprocess(image, label):
            x = tf.image.resize(tf.cast(image, tf.float32), (32, 32))
            return tf.image.random_flip_left_right(x), label


        ds = tf.data.Dataset.from_tensor_slices((images, labels)).map(preprocess).batch(8)
        check = preprocess(images[0], labels[0])
        """,
    )
    assert out.status == "changed", out.reason
    assert "def preprocess(image, label):" in out.code
    assert "def preprocess_prefix(image, label):" in out.code and "    return x, label\n" in out.code
    assert "def preprocess_rest(x, label):" in out.code
    assert ".map(preprocess_prefix).cache().map(preprocess_rest).batch(8)" in out.code
    ast.parse(out.code)


def test_a_map_random_from_its_first_statement_is_not_split() -> None:
    assert_skipped(
        "tfdata-cache",
        """
        import tensorflow as tf
        def augment(image, label):
            image = tf.image.random_flip_left_right(image)
            image = tf.cast(image, tf.float32) / 255.0
            return image, label
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(100).map(augment).batch(4)
        """,
        "its first statement calls tf.image.random_flip_left_right (random or stateful)",
    )


def test_a_map_whose_rest_needs_a_python_value_of_the_start_is_not_split() -> None:
    assert_skipped(
        "tfdata-cache",
        """
        import tensorflow as tf
        def augment(image, label):
            image = tf.cast(image, tf.float32) / 255.0
            size = 28 + 4
            image = tf.image.random_crop(tf.image.resize(image, (size, size)), (28, 28, 1))
            return image, label
        ds = tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(4)
        """,
        "the rest reads size, a Python value",
    )


def test_a_deterministic_map_after_shuffle_moves_before_it_only_when_element_wise() -> None:
    """scale() reads a tf.Variable (state that changes between epochs): deterministic by its calls, but
    not a function of its element alone, so the shuffle is not moved past it."""
    src = """
    import tensorflow as tf
    SCALE = tf.Variable(2.0)
    def scale(x):
        return tf.cast(x, tf.float32) * SCALE
    ds = tf.data.Dataset.from_tensor_slices(x).shuffle(100).map(scale).batch(4)
    """
    assert_skipped("tfdata-cache", src, "map() after shuffle(), which it cannot move before: reads SCALE")
    # the same without the variable: moved, and the shuffle follows the cache
    ok = src.replace("SCALE = tf.Variable(2.0)", "SCALE = 2.0")
    status, code, _, reason = apply("tfdata-cache", ok)
    assert status == "changed", reason
    assert ".map(scale).cache().shuffle(100).batch(4)" in code
    # a filter after a shuffle is never moved before it (it changes what the shuffle buffer holds)
    assert_skipped(
        "tfdata-cache",
        ok.replace(".map(scale)", ".filter(lambda v: v > 0).map(scale)"),
        "filter() after shuffle(), which it cannot move before",
    )


def test_cache_never_follows_a_random_map_of_an_earlier_assignment() -> None:
    assert_skipped(
        "tfdata-cache",
        """
        import tensorflow as tf
        ds = tf.data.Dataset.from_tensor_slices(x)
        ds = ds.map(lambda v: v + tf.random.uniform([]))
        ds = ds.map(lambda v: tf.cast(v, tf.float32)).batch(4)
        """,
        "ds (line 4): the pipeline already ran map() at line 3 (it draws random numbers",
    )


def test_cache_after_a_zip_of_pipelines_follows_what_each_one_already_ran() -> None:
    """keras-io's MixUp zips two shuffled, batched pipelines and maps a random mix over the pairs: a cache
    after the zip would replay one epoch's pairing. A zip of unshuffled in-memory pipelines is in memory
    too: a deterministic map after it is cached."""
    zipped = """
        import tensorflow as tf
        one = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(6400).batch(64)
        two = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(6400).batch(64)
        ds = tf.data.Dataset.zip((one, two))
        mixed = ds.map(lambda a, b: (a[0] + b[0], a[1]), num_parallel_calls=tf.data.AUTOTUNE)
        model.fit(mixed)
        """
    status, _, _, reason = apply("tfdata-cache", zipped)
    assert status == "skipped"
    assert "ds (line 4): zip() reads one (line 2), which already ran shuffle(): a cache after it" in reason
    assert "mixed (line 5): zip() (line 4) reads one (line 2), which already ran shuffle()" in reason
    assert "cannot tell whether the decoded data fits" not in reason
    assert_codemod(
        "tfdata-cache",
        """
        import tensorflow as tf
        images = tf.data.Dataset.from_tensor_slices(x)
        labels = tf.data.Dataset.from_tensor_slices(y)
        ds = tf.data.Dataset.zip((images, labels))
        ds = ds.map(lambda a, b: (tf.cast(a, tf.float32) / 255.0, b)).shuffle(256).batch(32)
        model.fit(ds)
        """,
        """
        import tensorflow as tf
        images = tf.data.Dataset.from_tensor_slices(x)
        labels = tf.data.Dataset.from_tensor_slices(y)
        ds = tf.data.Dataset.zip((images, labels))
        ds = ds.map(lambda a, b: (tf.cast(a, tf.float32) / 255.0, b)).cache().shuffle(256).batch(32)
        model.fit(ds)
        """,
    )
    # one input read from a file: not known to fit in memory, said as before
    status, _, _, reason = apply(
        "tfdata-cache",
        """
        import tensorflow as tf
        images = tf.data.TFRecordDataset(files)
        labels = tf.data.Dataset.from_tensor_slices(y)
        ds = tf.data.Dataset.zip((images, labels)).map(lambda a, b: (tf.io.parse_tensor(a, tf.float32), b))
        model.fit(ds.batch(8))
        """,
    )
    assert status == "skipped" and "ds (line 4) reads zip(): tfdoctor cannot tell" in reason


def test_cache_leaves_a_pipeline_no_training_reads_and_follows_one_a_function_builds() -> None:
    """TensorFlow's "Load and preprocess images" maps a Rescaling over train_ds only to look at one batch
    (``next(iter(normalized_ds))``): no cache there, and the pipeline is named. A pipeline a function of
    the script's builds and returns (keras-io's segmentation: ``get_dataset()``) still feeds training."""
    status, code, warnings, reason = apply(
        "tfdata-cache",
        """
        import tensorflow as tf
        def get_dataset(x):
            dataset = tf.data.Dataset.from_tensor_slices(x)
            dataset = dataset.map(lambda v: tf.cast(v, tf.float32) / 255.0)
            return dataset.batch(4)
        train_ds = get_dataset(x)
        normalized_ds = tf.data.Dataset.from_tensor_slices(x).map(lambda v: tf.cast(v, tf.float32) / 255.0)
        image_batch = next(iter(normalized_ds))
        model.fit(train_ds)
        """,
    )
    assert status == "changed" and reason == "cache() after map() of dataset (line 4)", reason
    assert "dataset = dataset.map(lambda v: tf.cast(v, tf.float32) / 255.0).cache()" in code
    assert ".map(lambda v: tf.cast(v, tf.float32) / 255.0)\nimage_batch" in code  # normalized_ds unchanged
    assert "left alone: normalized_ds, which no training or evaluation reads" in warnings


def test_cache_does_not_trust_a_map_calling_an_object_it_cannot_see_into() -> None:
    """augmenter is a Keras model (it may hold RandomFlip): its name says nothing about randomness."""
    assert_skipped(
        "tfdata-cache",
        """
        import keras
        import tensorflow as tf
        augmenter = keras.Sequential([keras.layers.RandomFlip()])
        ds = tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (augmenter(a), b)).batch(4)
        """,
        "map() calls a function tfdoctor cannot inspect",
    )


def test_cache_unchanged_on_the_expert_example() -> None:
    out = get_fix("tfdata-cache").apply((EXAMPLES / "expert.py").read_text(), FixContext())
    assert out.status == "skipped" and "already caches" in out.reason


# -- generator-prefetch ----------------------------------------------------------------------------
def test_generator_feeding_the_loop_is_wrapped_in_a_background_prefetcher() -> None:
    out = outcome(
        "generator-prefetch",
        """
        import tensorflow as tf


        def batches(n):
            for i in range(n):
                yield make(i)


        for x, y in batches(10):
            with tf.GradientTape() as tape:
                loss = f(x, y)
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
        """,
    )
    assert out.status == "changed", out.reason
    assert "for x, y in tfdoctor_prefetch(batches(10)):" in out.code
    assert out.code.index("def tfdoctor_prefetch(") < out.code.index("def batches(")
    assert any("tf.data ops" in a for a in out.advice), out.advice
    assert not any("tf.data ops" in w for w in out.warnings)  # advice is not a note on the edit
    ast.parse(out.code)


def test_generator_prefetcher_yields_the_same_items_in_order_and_reraises() -> None:
    """The helper added to the script, executed: same items, same order, errors surface in the loop."""
    code = get_fix("generator-prefetch").apply((EXAMPLES / "naive_loop.py").read_text(), FixContext()).code
    tree = ast.parse(code)
    helper = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "tfdoctor_prefetch")
    ns: dict[str, object] = {}
    exec(compile(ast.Module([helper], []), "helper", "exec"), ns)
    prefetch = ns["tfdoctor_prefetch"]
    assert list(prefetch(iter(range(50)), depth=2)) == list(range(50))  # type: ignore[operator]

    def broken():
        yield 1
        raise ValueError("bad batch")

    got = []
    with pytest.raises(ValueError, match="bad batch"):
        for item in prefetch(broken()):  # type: ignore[operator]
            got.append(item)
    assert got == [1]


def test_generator_prefetch_unchanged_when_no_generator_feeds_training() -> None:
    assert_skipped(
        "generator-prefetch",
        """
        def numbers():
            yield 1
        print(sum(numbers()))
        """,
        "no Python generator feeds the training loop",
    )


LOADER_CLASS = """
import numpy as np
import tensorflow as tf
from tqdm import tqdm


class Loader:
    def __init__(self, n, batch_size):
        self.n = n
        self.batch_size = batch_size

    def __len__(self):
        return self.n // self.batch_size

    def __iter__(self):
        for i in range(len(self)):
            if i == 3 and self.n < 0:
                return
            yield {"image": np.full((self.batch_size, 2), i, np.float32), "target": np.arange(self.batch_size)}


class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def train_one_epoch(self, dataloader):
        for s in (pbar := tqdm(dataloader)):
            with tf.GradientTape() as tape:
                loss = self.model(s["image"])
            grads = tape.gradient(loss, self.model.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.model.trainable_weights))
            pbar.set_description(f"loss {loss.numpy():.3f}")


def main():
    loader = Loader(100, 8)
    Trainer(model, opt).train_one_epoch(loader)
"""


def test_a_loader_class_whose_iter_is_a_generator_gets_the_prefetcher_inside_iter() -> None:
    """User repositories' hand-written loaders (``class Loader`` with a generator ``__iter__``, iterated as
    ``tqdm(dataloader)`` in a trainer's method): the thread goes into ``__iter__``, so every loop over an
    instance gets it and ``len(loader)`` (tqdm's total) still works."""
    out = outcome("generator-prefetch", LOADER_CLASS, facts=Facts(input_kind="numpy"))
    assert out.status == "changed", out.reason
    assert "Loader.__iter__() (line 14) runs in a background thread" in out.reason
    assert "for s in (pbar := tqdm(dataloader)):" in out.code  # the loop is as it was
    assert "return tfdoctor_prefetch(tfdoctor_items())" in out.code
    ns: dict[str, object] = {}
    classes = out.code.split("class Trainer")[0].replace(
        "import tensorflow as tf\nfrom tqdm import tqdm\n", ""
    )
    exec(compile(classes, "fixed", "exec"), ns)
    loader = ns["Loader"](20, 4)  # type: ignore[operator]
    assert len(loader) == 5
    got = [int(b["image"][0, 0]) for b in loader]
    assert got == [0, 1, 2, 3, 4]
    assert any("Loader.__iter__() still does its per-example work" in a for a in out.advice), out.advice


def test_a_loader_class_is_left_alone_when_the_run_read_tf_data_or_iter_calls_bare_super() -> None:
    assert_skipped(
        "generator-prefetch", LOADER_CLASS, "no Python generator", facts=Facts(input_kind="tf.data")
    )
    bare_super = LOADER_CLASS.replace(
        "for i in range(len(self)):", "super().__iter__()\n        for i in range(len(self)):"
    )
    assert_skipped(
        "generator-prefetch",
        bare_super,
        "Loader.__iter__ calls super() without arguments: left as it is",
        facts=Facts(input_kind="numpy"),
    )
    never_made = LOADER_CLASS.replace("loader = Loader(100, 8)", "loader = make_loader()")
    assert_skipped("generator-prefetch", never_made, "no Python generator", facts=Facts(input_kind="numpy"))


FROM_GENERATOR = """
import numpy as np
import tensorflow as tf


class Examples:
    def __init__(self, n, seed):
        self.n = n
        self.rng = np.random.default_rng(seed)

    def __call__(self):
        for i in self.rng.permutation(self.n):
            yield np.full((2, 3), i, np.float64) * self.rng.random(), {"label": i, "weight": 0.5}


def varying():
    for i in range(5):
        yield np.arange(i)


signature = (tf.TensorSpec((2, 3), tf.float32), {"label": tf.TensorSpec((), tf.int32), "weight": tf.TensorSpec((), tf.float32)})
ds = tf.data.Dataset.from_generator(Examples(150, seed=3), output_signature=signature).batch(32)
old_style = tf.data.Dataset.from_generator(
    Examples(70, seed=4), output_types=(tf.float32, {"label": tf.int32, "weight": tf.float32}),
    output_shapes=((2, 3), {"label": (), "weight": ()}),
)
ragged = tf.data.Dataset.from_generator(varying, output_signature=tf.TensorSpec((None,), tf.int64))
with_args = tf.data.Dataset.from_generator(varying, args=(), output_signature=tf.TensorSpec((None,), tf.int64))
"""


def test_from_generator_takes_the_generators_items_in_chunks_with_the_same_elements() -> None:
    """A per-example generator read by ``from_generator`` paid one Python call per item (26 ms a batch of
    64 CIFAR-sized images on 2 cores, 7 ms in chunks); the chunked pipelines, executed here, give the same
    elements in the same order, with the same element spec; shapes that vary are left as they were."""
    out = outcome("generator-prefetch", FROM_GENERATOR)
    assert out.status == "changed", out.reason
    assert out.reason.startswith(
        "from_generator() at line 21, line 22, line 26 takes the generator's items 64 at a time"
    )
    assert out.reason.endswith("from_generator() at line 27 passes args=: left as it is"), out.reason
    assert "ragged = tfdoctor_from_generator(varying" in out.code  # the helper falls back at run time
    assert "with_args = tf.data.Dataset.from_generator(varying, args=()" in out.code
    import tensorflow as tf

    before: dict[str, object] = {}
    after: dict[str, object] = {}
    exec(compile(textwrap.dedent(FROM_GENERATOR), "before", "exec"), before)
    exec(compile(out.code, "after", "exec"), after)
    for name in ("ds", "old_style", "ragged"):
        a, b = before[name], after[name]
        assert a.element_spec == b.element_spec, name  # type: ignore[attr-defined]
        flat_a = [tf.nest.map_structure(lambda t: t.numpy().tolist(), e) for e in a]  # type: ignore[attr-defined]
        flat_b = [tf.nest.map_structure(lambda t: t.numpy().tolist(), e) for e in b]  # type: ignore[attr-defined]
        assert flat_a == flat_b, name
        assert flat_a, name
    assert (
        "ds = tfdoctor_from_generator(Examples(150, seed=3), output_signature=signature).batch(32)"
        in out.code
    )


def test_chunked_from_generator_hands_on_the_items_before_a_generators_error() -> None:
    code = outcome("generator-prefetch", FROM_GENERATOR).code
    ns: dict[str, object] = {}
    exec(compile(code, "after", "exec"), ns)
    import numpy as np
    import tensorflow as tf

    def broken():
        for i in range(70):
            yield np.float32(i)
        raise ValueError("bad example")

    got = []
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad example"):
        for e in ns["tfdoctor_from_generator"](broken, output_signature=tf.TensorSpec((), tf.float32)):  # type: ignore[operator]
            got.append(float(e))
    assert got == [float(i) for i in range(70)]


# -- tf-function -----------------------------------------------------------------------------------
def test_tf_function_decorates_the_step_function() -> None:
    warnings = assert_codemod(
        "tf-function",
        """
        import tensorflow as tf

        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        """,
    )
    assert warnings == ()


def test_tf_function_extracts_an_inline_loop_body() -> None:
    assert_codemod(
        "tf-function",
        """
        import tensorflow as tf


        def main():
            total = 0.0
            for epoch in range(2):
                for x, y in data():
                    x = x / 255.0
                    with tf.GradientTape() as tape:
                        logits = model(x, training=True)
                        loss = loss_fn(y, logits)
                    grads = tape.gradient(loss, model.trainable_variables)
                    optimizer.apply_gradients(zip(grads, model.trainable_variables))
                    total += float(loss)
            print(total)
        """,
        """
        import tensorflow as tf


        def main():
            total = 0.0
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    logits = model(x, training=True)
                    loss = loss_fn(y, logits)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

            for epoch in range(2):
                for x, y in data():
                    x = x / 255.0
                    loss = train_step(x, y)
                    total += float(loss)
            print(total)
        """,
    )


def test_tf_function_extracts_a_step_under_an_if_in_the_loop() -> None:
    """keras-io's DQN (Breakout): the frame loop updates under ``if frame_count % 4 == 0 and ...:``
    (an eager tape one level down from the loop's body: "no training step found" before); the test
    stays in the loop, the step in the branch is extracted. An ``else`` branch's step too."""
    assert_codemod(
        "tf-function",
        """
        import tensorflow as tf

        while True:
            for timestep in range(1, 100):
                frame_count += 1
                if frame_count % 4 == 0 and len(done_history) > 32:
                    masks = tf.one_hot(action_sample, 4)
                    with tf.GradientTape() as tape:
                        q_action = tf.reduce_sum(model(state_sample) * masks, axis=1)
                        loss = loss_function(updated_q_values, q_action)
                    grads = tape.gradient(loss, model.trainable_variables)
                    optimizer.apply_gradients(zip(grads, model.trainable_variables))
                if done:
                    break
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(masks):
            with tf.GradientTape() as tape:
                q_action = tf.reduce_sum(model(state_sample) * masks, axis=1)
                loss = loss_function(updated_q_values, q_action)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        while True:
            for timestep in range(1, 100):
                frame_count += 1
                if frame_count % 4 == 0 and len(done_history) > 32:
                    masks = tf.one_hot(action_sample, 4)
                    loss = train_step(masks)
                if done:
                    break
        """,
    )
    out = outcome(
        "tf-function",
        """
        import tensorflow as tf

        for x, y in batches:
            if warmup:
                pass
            else:
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
        """,
    )
    assert out.status == "changed", out.reason
    assert "    else:\n        loss = train_step(x, y)\n" in out.code
    ast.parse(out.code)


COUNTER_LOOP = """
import tensorflow as tf

for epoch in range(30):
    for step, batch in enumerate(ds):
        with tf.GradientTape() as tape:
            noisy = batch + tf.random.normal(tf.shape(batch)) * (0.5 / (1 + epoch))
            loss = tf.reduce_mean(tf.square(model(noisy) - batch)) * (1 + 0 * (step % 100 == 0))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
"""


def test_tf_function_passes_loop_counters_the_step_reads_as_tensors() -> None:
    """A Python int argument traces a tf.function again for each new value: the epoch counter read by
    the step would retrace it every epoch (measured on such a script: 0.30 s an epoch against 0.07 s),
    a step counter every step. Arithmetic with a division or a float gets float32, with integer
    literals only int32."""
    out = outcome("tf-function", COUNTER_LOOP)
    assert out.status == "changed", out.reason
    assert "train_step(batch, tf.constant(epoch, tf.float32), tf.constant(step, tf.float32))" in out.code
    assert "passed as tensors" in out.reason
    ast.parse(out.code)
    only_ints = COUNTER_LOOP.replace("(0.5 / (1 + epoch))", "1.0").replace(
        "(1 + 0 * (step % 100 == 0))", "tf.cast(step % 100 == 0, tf.float32)"
    )
    out = outcome("tf-function", only_ints)
    assert "train_step(batch, tf.constant(step, tf.int32))" in out.code, out.code
    assert "step passed as a tensor" in out.reason


@pytest.mark.parametrize(
    "use",
    [
        "schedule[epoch]",  # an index into a Python list
        "float(len(range(epoch)))",  # a Python call
        "(1.0 if epoch < 5 else 0.5)",  # a Python test
    ],
)
def test_tf_function_keeps_a_counter_python_where_a_read_needs_the_int_and_says_so(use: str) -> None:
    src = COUNTER_LOOP.replace("(0.5 / (1 + epoch))", use)
    out = outcome("tf-function", src)
    assert out.status == "changed", out.reason
    assert "tf.constant(epoch" not in out.code
    assert "epoch passed as Python numbers: the step is traced again for each new value" in out.reason


def test_tf_function_tells_a_comprehensions_own_variable_from_the_loop_counter() -> None:
    """``[... for epoch in range(2)]`` inside the step binds its own ``epoch`` (Python 3): it neither
    rebinds the loop's counter nor reads it, so the counter still goes in as a tensor; the
    comprehension's first iterable is read in the step's scope (``range(epoch)`` there needs the int)."""
    comp = "tf.add_n([tf.reduce_sum(v) * 0.0 for epoch in range(2) for v in model.trainable_variables])"
    src = COUNTER_LOOP.replace("(1 + 0 * (step % 100 == 0))", comp)
    out = outcome("tf-function", src)
    assert "train_step(batch, tf.constant(epoch, tf.float32))" in out.code, out.code
    iterable = comp.replace("for epoch in range(2) for v in", "for v in list(range(epoch)) for w in")
    out = outcome("tf-function", COUNTER_LOOP.replace("(1 + 0 * (step % 100 == 0))", iterable))
    assert "tf.constant(epoch" not in out.code and "epoch passed as Python numbers" in out.reason


def test_tf_function_passes_a_counter_given_to_the_decorated_step_as_a_tensor() -> None:
    """The step is a function taking the epoch: its calls in the loop pass it as a tensor."""
    assert_codemod(
        "tf-function",
        """
        import tensorflow as tf

        def train_step(x, y, epoch):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x)) * (0.5 / (1 + epoch))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        for epoch in range(10):
            for x, y in ds:
                train_step(x, y, epoch)
        """,
        """
        import tensorflow as tf

        @tf.function
        def train_step(x, y, epoch):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x)) * (0.5 / (1 + epoch))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        for epoch in range(10):
            for x, y in ds:
                train_step(x, y, tf.constant(epoch, tf.float32))
        """,
    )


def test_tf_function_keeps_a_counter_a_method_step_tests_in_python_and_says_it_retraces() -> None:
    out = outcome(
        "tf-function",
        """
        import tensorflow as tf

        class Trainer:
            def step(self, x, y, i):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                    if i % 100 == 0:
                        tf.print(loss)
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))

            def fit(self):
                for i, (x, y) in enumerate(ds):
                    self.step(x, y, i=i)
        """,
    )
    assert out.status == "changed" and "self.step(x, y, i=i)" in out.code
    assert "i (line 14) passed as Python numbers: the step is traced again for each new value" in out.reason


def test_tf_function_fallback_variant_passes_counters_as_python_numbers() -> None:
    fix = get_fix("tf-function")
    first, fallback = fix.variants(FixContext())
    assert first == {} and fallback.get("fallback")
    out = fix.apply(d(COUNTER_LOOP), FixContext(params=fallback))
    assert out.status == "changed" and "tf.constant(" not in out.code
    assert "epoch, step passed as Python numbers" in out.reason


def test_tf_function_reports_python_side_effects_in_the_step() -> None:
    out = get_fix("tf-function").apply((EXAMPLES / "side_effects.py").read_text(), FixContext())
    assert out.status == "changed"  # warned, not refused: the loop measures and then rejects it
    effects = " | ".join(out.side_effects)
    assert "losses.append(...)" in effects
    assert "print()" in effects
    assert "float(...)" in effects


def test_tf_function_unchanged_when_the_step_is_compiled_and_refuses_break_in_the_step() -> None:
    assert_skipped(
        "tf-function",
        """
        import tensorflow as tf
        def step(x):
            with tf.GradientTape() as t:
                l = f(x)
            opt.apply_gradients(zip(t.gradient(l, v), v))
        step = tf.function(step)
        """,
        "already a tf.function",
    )
    assert_skipped(
        "tf-function",
        """
        import tensorflow as tf
        for x in data:
            with tf.GradientTape() as t:
                l = f(x)
                if l < 0:
                    break
            opt.apply_gradients(zip(t.gradient(l, v), v))
        """,
        "uses break",
    )


# -- steps-per-execution ---------------------------------------------------------------------------
def test_steps_per_execution_in_compile() -> None:
    assert_codemod(
        "steps-per-execution",
        """
        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y)
        """,
        """
        model.compile(optimizer="sgd", loss="mse", steps_per_execution=8)
        model.fit(x, y)
        """,
    )


def test_steps_per_execution_skipped_for_custom_loops_and_when_set() -> None:
    assert_skipped(
        "steps-per-execution",
        'model.compile(optimizer="sgd", loss="mse", steps_per_execution=4)\n',
        "already sets steps_per_execution",
    )
    assert_skipped(
        "steps-per-execution",
        'model.compile(optimizer="sgd", loss="mse")\n',
        "custom training loop",
        facts=Facts(loop_kind="custom"),
    )


# -- xla-jit ---------------------------------------------------------------------------------------
def test_xla_is_not_tried_on_a_fit_model_keras_runs_without_it() -> None:
    """TensorFlow's transfer-learning tutorial: RandomFlip/RandomRotation in the model. Keras compiles it
    without XLA whatever compile() asks; the trial ran and its facts showed jit_compile False."""
    fix = get_fix("xla-jit")
    facts = Facts(loop_kind="keras_fit", step_kind="tf.function", xla_unsupported=["RandomRotation"])
    why = fix.precheck(FixContext(facts=facts))
    assert why is not None and "RandomRotation does not support XLA" in why
    two = FixContext(facts=facts.model_copy(update={"xla_unsupported": ["RandomFlip", "op determinism"]}))
    assert "RandomFlip, op determinism do not support XLA" in (fix.precheck(two) or "")
    assert fix.precheck(FixContext(facts=facts.model_copy(update={"xla_unsupported": []}))) is None
    custom = facts.model_copy(update={"loop_kind": "custom"})  # a tf.function step: Keras does not decide
    assert fix.precheck(FixContext(facts=custom)) is None


def test_xla_on_the_step_decorator_and_on_compile() -> None:
    assert_codemod(
        "xla-jit",
        """
        import tensorflow as tf

        @tf.function
        def step(x):
            with tf.GradientTape() as t:
                l = f(x)
            opt.apply_gradients(zip(t.gradient(l, v), v))

        @tf.function
        def predict(x):
            return model(x)

        model.compile(optimizer="adam", loss="mse")
        """,
        """
        import tensorflow as tf

        @tf.function(jit_compile=True)
        def step(x):
            with tf.GradientTape() as t:
                l = f(x)
            opt.apply_gradients(zip(t.gradient(l, v), v))

        @tf.function
        def predict(x):
            return model(x)

        model.compile(optimizer="adam", loss="mse", jit_compile=True)
        """,
    )


def test_xla_on_a_step_decorated_with_function_imported_from_tensorflow() -> None:
    """A blog's Transformer loop: ``from tensorflow import function, GradientTape``, no ``import
    tensorflow``; ``@function`` is tf.function (it had been "no tf.function training step")."""
    src = """
        from tensorflow import GradientTape, function
        from tensorflow import function as tf_fn

        @function
        def train_step(x, y):
            with GradientTape() as tape:
                loss = loss_fcn(y, model(x, training=True))
            gradients = tape.gradient(loss, model.trainable_weights)
            optimizer.apply_gradients(zip(gradients, model.trainable_weights))

        def eval_step(x):
            return model(x)

        eval_fn = tf_fn(eval_step)
        """
    # eval_fn = tf_fn(eval_step) is not a training step: left as it is
    assert_codemod("xla-jit", src, src.replace("@function\n", "@function(jit_compile=True)\n"))
    assert_skipped("tf-function", src, "the training step is already a tf.function (train_step)")


def test_steps_per_execution_skips_a_batch_hook_that_changes_the_training_and_names_one_that_logs() -> None:
    """Keras calls batch hooks once per execution (checked: 64 batches at steps_per_execution=8, 8 calls of
    on_train_batch_begin, batches 0, 8, 16, ...): a warm-up written as a callback would then set the rate
    once per 8 batches, a different schedule; a logger only logs less often."""
    src = """
        import keras


        class Warmup(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                self.model.optimizer.learning_rate = 1e-3 * min(1.0, (batch + 1) / 100)


        class Logger(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                print(batch, logs["loss"], float(self.model.optimizer.learning_rate))


        model.compile(optimizer="adam", loss="mse")
        model.fit(x, y, callbacks=[Warmup(), Logger(), keras.callbacks.LambdaCallback(on_batch_end=log)])
        """
    assert_skipped(
        "steps-per-execution",
        src,
        "Warmup.on_train_batch_begin() (line 5) sets self.model.optimizer.learning_rate every batch: with "
        "steps_per_execution=8 Keras calls it once per 8 batches",
    )
    out = outcome("steps-per-execution", src.replace("Warmup(), ", ""))
    assert out.status == "changed", out.reason
    assert out.warnings == (
        "Logger.on_train_batch_end() (line 10), LambdaCallback(on_batch_end=...) (line 15): Keras calls batch "
        "hooks once per 8 batches with steps_per_execution=8 (what they log or count per batch comes 8× less "
        "often)",
    )


def test_tf_function_reduces_retracing_where_the_run_saw_the_input_change_shape() -> None:
    """An eager text loop padding each batch to its own longest sequence: a plain @tf.function traced once
    per new length (tf-function measured 1.80x [1.09, 2.28]); with reduce_retracing=True 10.73x [8.76, 13.14]
    (the run's facts say the input changed shape: tests/integration/test_profile_cli.py). Side by side,
    epochs 2-3: 4.05 s an epoch eagerly, 0.39 s compiled so. A run of fixed shapes gets the plain decorator."""
    src = (SHAPES / "dynamic_padding.py").read_text()
    vary = Facts(loop_kind="custom", step_kind="eager", input_shapes_vary=True)
    out = get_fix("tf-function").apply(src, FixContext(facts=vary, filename="dynamic_padding.py"))
    assert out.changed, out.reason
    assert "@tf.function(reduce_retracing=True)\ndef train_step(x, y):" in out.code
    assert out.reason.endswith(
        "; reduce_retracing=True: the step's input changed shape from step to step in the run (a trace per new "
        "shape otherwise)"
    ), out.reason
    fixed = Facts(loop_kind="custom", step_kind="eager", input_shapes_vary=False)
    out = get_fix("tf-function").apply(src, FixContext(facts=fixed, filename="dynamic_padding.py"))
    assert "@tf.function\ndef train_step(x, y):" in out.code and "reduce_retracing" not in out.reason
    # a step function of its own is decorated the same way
    step = src.replace(
        "    for step, (x, y) in enumerate(batches()):\n        with tf.GradientTape() as tape:",
        "    for step, (x, y) in enumerate(batches()):\n        loss = step_fn(x, y)\n        total += float(loss)\n\n\n"
        "def step_fn(x, y):\n    if True:\n        with tf.GradientTape() as tape:",
    )
    assert "def step_fn" in step
    got = get_fix("tf-function").apply(step, FixContext(facts=vary, filename="dynamic_padding.py"))
    assert got.changed and "@tf.function(reduce_retracing=True)\ndef step_fn(x, y):" in got.code, got.reason


def test_tf_function_relaxes_a_step_the_run_traced_again_and_again() -> None:
    """The same text loop with the user's own @tf.function step: the harness counted 11 retraces (TFD204, which
    now names tf-function); the decorator gets reduce_retracing=True. Two or fewer (a last partial batch) is
    the step already compiled; a step setting reduce_retracing or an input_signature is left, said."""
    src = (SHAPES / "dynamic_padding.py").read_text()
    src = src.replace(
        "for epoch in range(3):",
        "@tf.function\ndef train_step(x, y):\n    with tf.GradientTape() as tape:\n        loss = loss_fn(y, model(x))\n"
        "    grads = tape.gradient(loss, model.trainable_variables)\n"
        "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n    return loss\n\n\nfor epoch in range(3):",
    )
    fix = get_fix("tf-function")
    traced = FixContext(facts=Facts(loop_kind="custom", step_kind="tf.function", retraces=11))
    assert fix.precheck(traced) is None
    out = fix.apply(src, traced)
    assert out.changed and "@tf.function(reduce_retracing=True)\ndef train_step(x, y):" in out.code
    assert out.reason.startswith(
        "reduce_retracing=True on the tf.function train_step() (line 32): the run traced it 12 times"
    )
    once = FixContext(facts=Facts(loop_kind="custom", step_kind="tf.function", retraces=1))
    assert fix.precheck(once) == "the profiled training step already runs as a tf.function"
    assert_skipped(  # the step is not in this file: said, not "no training step found"
        "tf-function",
        "from steps import train_step\nfor x, y in ds:\n    train_step(x, y)\n",
        "the profiled training step already runs as a tf.function, defined outside this script",
        facts=Facts(loop_kind="custom", step_kind="tf.function", retraces=9),
    )
    pinned = src.replace("@tf.function\n", "@tf.function(input_signature=SIG)\n")
    assert_skipped(
        "tf-function",
        pinned,
        "the training step is already a tf.function (train_step); the run traced train_step() 12 times though it "
        "sets input_signature",
        facts=Facts(loop_kind="custom", step_kind="tf.function", retraces=11),
    )


def test_batch_scale_says_where_a_batch_read_at_run_time_is_used() -> None:
    """User repositories keep their settings in a YAML file (``cfg = yaml.safe_load(f)``,
    ``.batch(cfg["train"]["batch_size"])``): the skip listed what it looked for; it now names the value and
    its line. ``self.batch_size`` (given where the instance is made) keeps the general reason."""
    src = """
        import yaml
        import tensorflow as tf

        with open("config.yaml") as f:
            cfg = yaml.safe_load(f)
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1000).batch(cfg["train"]["batch_size"])
        model.compile(optimizer=tf.keras.optimizers.Adam(cfg["train"]["lr"]), loss="mse")
        model.fit(ds, epochs=cfg["train"]["epochs"])
        """
    assert_skipped(
        "batch-scale",
        src,
        'the batch size is cfg["train"]["batch_size"] (line 6), a value the script reads at run time',
    )
    assert_skipped(
        "batch-scale",
        src.replace('cfg["train"]["batch_size"]', "self.batch_size"),
        "no batch size found to scale",
    )


def test_xla_skips_a_step_writing_summaries_before_spending_a_run() -> None:
    """pix2pix writes tf.summary.scalar inside its step: under jit_compile the run fails with "No
    registered 'WriteSummary'" (it did, after a run); said before any run now."""
    assert_skipped(
        "xla-jit",
        """
        import tensorflow as tf

        @tf.function
        def train_step(x, step):
            with tf.GradientTape() as tape:
                loss = f(x)
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
            with writer.as_default():
                tf.summary.scalar("loss", loss, step=step)
        """,
        "train_step() writes tf.summary.scalar() (line 9): XLA cannot compile summary ops",
    )


def test_xla_skips_a_step_reaching_python_through_the_files_functions_before_spending_a_run() -> None:
    """TensorFlow's actor-critic tutorial runs an episode inside its @tf.function step and steps the
    environment with tf.numpy_function two calls down: under jit_compile the trial failed after a run
    ("No registered 'PyFunc' OpKernel for XLA_CPU_JIT"). The calls are followed through the file's
    functions; a py_function the step does not reach leaves XLA to be tried."""
    src = """
        import tensorflow as tf

        def env_call(action):
            return tf.numpy_function(env_step, [action], [tf.float32])

        def run_episode(state):
            return env_call(model(state))

        def augment(x):
            return tf.py_function(flip, [x], tf.float32)

        ds = ds.map(augment)

        @tf.function
        def train_step(state):
            with tf.GradientTape() as tape:
                loss = run_episode(state)
            opt.apply_gradients(zip(tape.gradient(loss, v), v))
        """
    assert_skipped(
        "xla-jit",
        src,
        "train_step() calls tf.numpy_function() (line 4, via run_episode() → env_call()): XLA cannot compile "
        "Python called from the graph",
    )
    out = outcome("xla-jit", src.replace("return env_call(model(state))", "return model(state)"))
    assert out.status == "changed", out.reason


def test_xla_unchanged_when_the_script_decides_and_a_switch_when_the_step_is_elsewhere() -> None:
    assert_skipped("xla-jit", (EXAMPLES / "expert.py").read_text(), "already sets jit_compile")
    out = get_fix("xla-jit").apply(
        "import mylib\nmylib.train()\n", FixContext(facts=Facts(step_kind="tf.function"))
    )
    assert (
        out.status == "changed"
        and out.switches == {"jit": "1"}
        and out.code == "import mylib\nmylib.train()\n"
    )


# -- debug-switches ------------------------------------------------------------------------------
def test_debug_switches_takes_out_the_switch_the_run_had_on_and_nothing_else() -> None:
    source = """import tensorflow as tf

tf.debugging.enable_check_numerics()
tf.debugging.set_log_device_placement(False)
if args.debug:
    tf.data.experimental.enable_debug_mode()
"""
    facts = Facts(
        debug_switches=[
            "tf.debugging.enable_check_numerics() at train.py:3",
            "tf.data.experimental.enable_debug_mode() at train.py:6",
        ]
    )
    out = get_fix("debug-switches").apply(source, FixContext(facts=facts))
    assert out.status == "changed"
    assert out.reason == (
        "taken out: tf.debugging.enable_check_numerics() (line 3); tf.data.experimental.enable_debug_mode() (line 6)"
    )
    assert out.code == (
        "import tensorflow as tf\n\n"
        "# tfdoctor debug-switches: `tf.debugging.enable_check_numerics()` taken out (every op's float output "
        "is checked for NaN and Inf)\npass\n"
        "tf.debugging.set_log_device_placement(False)\n"
        "if args.debug:\n"
        "    # tfdoctor debug-switches: `tf.data.experimental.enable_debug_mode()` taken out (tf.data runs its "
        "functions eagerly and in order, with no parallelism)\n    pass\n"
    )
    ast.parse(out.code)


def test_debug_switches_skips_without_the_fact_and_says_where_it_cannot_reach() -> None:
    source = "import tensorflow as tf\ntf.debugging.enable_check_numerics()\n"
    assert "no debugging switch" in get_fix("debug-switches").apply(source, FixContext()).reason
    facts = Facts(debug_switches=["tf.debugging.enable_check_numerics() at utils.py:4"])
    out = get_fix("debug-switches").apply("import utils\nutils.setup()\n", FixContext(facts=facts))
    assert (
        out.status == "skipped" and "is not turned on by a statement of its own in the script" in out.reason
    )
    placement = Facts(debug_switches=["tf.debugging.set_log_device_placement() at train.py:1"])
    on = get_fix("debug-switches").apply(
        "tf.debugging.set_log_device_placement(True)\n", FixContext(facts=placement)
    )
    assert on.status == "changed" and on.code.endswith("pass\n")


# -- keras-on-batch ------------------------------------------------------------------------------
DQN_REPLAY = """class DQNAgent:
    def act(self, state):
        if np.random.rand() <= self.epsilon:
            return random.randrange(self.action_size)
        act_values = self.model.predict(state, verbose=0)
        return np.argmax(act_values[0])

    def replay(self, batch_size):
        for state, action, reward, next_state, done in random.sample(self.memory, batch_size):
            target = reward
            if not done:
                target = reward + self.gamma * np.amax(self.model.predict(next_state)[0])
            target_f = self.model.predict(state)
            target_f[0][action] = target
            self.model.fit(state, target_f, epochs=1, verbose=0)
        history = self.model.fit(state, target_f, epochs=1, verbose=0)
        self.model.fit(state, target_f, epochs=1, callbacks=[cb])
        test = self.model.predict(x_test)
"""


def _batch_call(api: str, code: str, rows: int = 1, calls: int = 24) -> KerasBatchCall:
    return KerasBatchCall(api=api, site="dqn.py:1", code=code, calls=calls, rows=rows, seconds=2.5)


def test_keras_on_batch_makes_the_calls_the_run_saw_one_batch_calls() -> None:
    """keon/deep-q-learning's agent: each predict() / fit() of one row builds a dataset and an iterator
    (120-130 ms here); predict_on_batch / train_on_batch run the batch. Only the lines the run saw with
    at most a batch of rows change; a fit whose History is used or that takes callbacks stays, said."""
    facts = Facts(
        keras_batch_calls=[
            _batch_call("predict", "act_values = self.model.predict(state, verbose=0)", calls=0),
            _batch_call(
                "predict", "target = reward + self.gamma * np.amax(self.model.predict(next_state)[0])"
            ),
            _batch_call("predict", "target_f = self.model.predict(state)"),
            _batch_call("fit", "self.model.fit(state, target_f, epochs=1, verbose=0)"),
            _batch_call("fit", "history = self.model.fit(state, target_f, epochs=1, verbose=0)"),
            _batch_call("fit", "self.model.fit(state, target_f, epochs=1, callbacks=[cb])"),
            _batch_call("predict", "test = self.model.predict(x_test)", rows=10000),  # not one batch
        ]
    )
    out = get_fix("keras-on-batch").apply(DQN_REPLAY, FixContext(facts=facts))
    assert out.status == "changed"
    assert out.code == (
        DQN_REPLAY.replace("self.model.predict(state, verbose=0)", "self.model.predict_on_batch(state)")
        .replace("self.model.predict(next_state)", "self.model.predict_on_batch(next_state)")
        .replace("target_f = self.model.predict(state)", "target_f = self.model.predict_on_batch(state)")
        .replace(
            "            self.model.fit(state, target_f, epochs=1, verbose=0)",
            "            self.model.train_on_batch(state, target_f)",
        )
    )
    assert out.reason == (
        "predict() -> predict_on_batch() at line 5 (1 row(s) a call); "
        "predict() -> predict_on_batch() at line 12 (1 row(s) a call); "
        "predict() -> predict_on_batch() at line 13 (1 row(s) a call); "
        "fit() -> train_on_batch() at line 15 (1 row(s) a call); left as they are: "
        "fit() at line 16: its History is used (train_on_batch returns the loss); "
        "fit() at line 17: it passes callbacks, which train_on_batch does not take"
    )
    ast.parse(out.code)


def test_keras_on_batch_finds_a_call_spanning_lines_and_the_one_the_run_saw_among_equal_lines() -> None:
    """The run notes the line the call ran on, which for a statement over several lines is not its first;
    a line's text found in several places (the training loop's predict and the evaluation's after it,
    which the run never reached) is the one at the line the run saw."""
    source = """for step in range(100):
    q = model.predict(state)
    model.fit(
        state,
        q,
        epochs=1,
        verbose=0,
    )
q = model.predict(state)
"""
    facts = Facts(
        keras_batch_calls=[
            KerasBatchCall(api="predict", site="t.py:2", code="q = model.predict(state)", calls=9, rows=1),
            KerasBatchCall(api="fit", site="t.py:3", code="model.fit(", calls=9, rows=1),
        ]
    )
    out = get_fix("keras-on-batch").apply(source, FixContext(facts=facts))
    assert out.status == "changed", out.reason
    assert out.code == (
        "for step in range(100):\n    q = model.predict_on_batch(state)\n    model.train_on_batch(\n        state,\n"
        "        q,\n    )\nq = model.predict(state)\n"
    )
    assert out.reason == (
        "predict() -> predict_on_batch() at line 2 (1 row(s) a call); fit() -> train_on_batch() at line 3 (1 row(s) a call)"
    )


def test_keras_on_batch_needs_the_calls_in_the_facts_and_one_batch_each() -> None:
    fix = get_fix("keras-on-batch")
    assert "no Keras predict() in the training loop" in fix.apply(DQN_REPLAY, FixContext()).reason
    big = Facts(keras_batch_calls=[_batch_call("predict", "test = self.model.predict(x_test)", rows=10000)])
    assert "more rows than one batch" in fix.apply(DQN_REPLAY, FixContext(facts=big)).reason
    elsewhere = Facts(keras_batch_calls=[_batch_call("predict", "q = agent.model.predict(s)")])
    out = fix.apply(DQN_REPLAY, FixContext(facts=elsewhere))
    assert out.status == "skipped" and "not in this file as the run read them" in out.reason
    sweep = Facts(keras_batch_calls=[_batch_call("fit", "model.fit(x, y, epochs=5, verbose=0)")])
    out = fix.apply("model.fit(x, y, epochs=5, verbose=0)\n", FixContext(facts=sweep))
    assert out.status == "skipped" and "it trains more than one epoch" in out.reason


# -- batch-scale -----------------------------------------------------------------------------------
def test_batch_scale_doubles_the_batch_and_scales_sgd_linearly() -> None:
    status, code, _, reason = apply(
        "batch-scale", (EXAMPLES / "naive_loop.py").read_text(), params={"factor": "2"}
    )
    assert status == "changed"
    assert 'add_argument("--batch-size", type=int, default=64)' in code
    assert 'add_argument("--lr", type=float, default=0.1)' in code
    assert "linear scaling for SGD" in reason


def test_batch_scale_uses_sqrt_scaling_for_adam() -> None:
    assert_codemod(
        "batch-scale",
        """
        BATCH_SIZE = 16
        opt = keras.optimizers.Adam(learning_rate=0.001)
        """,
        """
        BATCH_SIZE = 64
        opt = keras.optimizers.Adam(learning_rate=0.002)
        """,
        params={"factor": "4"},
    )


@pytest.mark.parametrize(
    "loss, where",
    [
        ('loss_fn = keras.losses.MeanSquaredError(reduction="sum")', 'reduction="sum" at line 2'),
        (
            "loss_fn = tf.keras.losses.MeanSquaredError(reduction=tf.keras.losses.Reduction.SUM)",
            "reduction=tf.keras.losses.Reduction.SUM at line 2",
        ),
    ],
)
def test_batch_scale_leaves_sgd_alone_on_a_summed_loss(loss: str, where: str) -> None:
    """With a loss summed over the batch the gradient, so SGD's step, grows with the batch already: the
    linear rule on top would make a ×2 batch a ×4 step. Adam's step does not depend on the gradient's
    scale: its square-root rule stands."""
    source = f"""
BATCH_SIZE = 32
{loss}
opt = keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
d_opt = keras.optimizers.Adam(learning_rate=0.001)
"""
    status, code, _, reason = apply("batch-scale", source, params={"factor": "2"})
    assert status == "changed"
    assert "BATCH_SIZE = 64" in code and "SGD(learning_rate=0.1, momentum=0.9)" in code
    assert "Adam(learning_rate=0.00141421)" in code
    assert f"SGD at line 3: left as it is (the loss is a sum over the batch, {where}" in reason


@pytest.mark.parametrize(
    "step, summed",
    [
        ("loss = tf.reduce_sum(tf.square(model(x) - y))\n        grads = tape.gradient(loss, w)", True),
        ("grads = tape.gradient(tf.math.reduce_sum(model(x) - y), w)", True),
        (
            "loss = tf.reduce_sum(tf.square(model(x) - y)) / BATCH_SIZE\n        grads = tape.gradient(loss, w)",
            False,
        ),
        ("loss = sum([tf.reduce_mean(model(x) - y), 0.0])\n        grads = tape.gradient(loss, w)", False),
    ],
)
def test_batch_scale_finds_a_loss_summed_in_the_step(step: str, summed: bool) -> None:
    """The gradient target (through the name it was assigned to) is a reduce_sum: summed; divided by the
    batch, or Python's sum() of per-batch means: not."""
    source = f"""
BATCH_SIZE = 32
opt = tf.keras.optimizers.SGD(0.05)


def step(x, y):
    with tf.GradientTape() as tape:
        {step}
    opt.apply_gradients(zip(grads, w))
"""
    status, code, _, reason = apply("batch-scale", source, params={"factor": "2"})
    assert status == "changed" and "BATCH_SIZE = 64" in code
    assert ("SGD(0.05)" in code) is summed, reason
    assert ("left as it is (the loss is a sum over the batch" in reason) is summed


def test_batch_scale_a_compute_loss_returning_a_sum_keeps_adams_rule() -> None:
    source = """
BATCH_SIZE = 32


class MaskedLanguageModel(keras.Model):
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
        loss = loss_fn(y, y_pred, sample_weight)
        return keras.ops.sum(loss)


model.compile(optimizer=keras.optimizers.SGD(0.01))
other = keras.optimizers.Adam()
"""
    status, code, _, reason = apply("batch-scale", source, params={"factor": "4"})
    assert status == "changed" and "SGD(0.01)" in code and "Adam(learning_rate=0.002)" in code
    assert "keras.ops.sum(...) at line 7" in reason


def test_batch_scale_scales_a_batch_size_parameter_default_and_the_lr_beside_it() -> None:
    """A plain trainer class taking ``batch_size=64`` and ``lr=1e-3`` as defaults of its __init__."""
    assert_codemod(
        "batch-scale",
        """
        class Trainer:
            def __init__(self, model, lr=1e-3, batch_size=64):
                self.optimizer = keras.optimizers.Adam(learning_rate=lr)
                self.dataset = make_dataset(batch_size)
        """,
        """
        class Trainer:
            def __init__(self, model, lr=0.00141421, batch_size=128):
                self.optimizer = keras.optimizers.Adam(learning_rate=lr)
                self.dataset = make_dataset(batch_size)
        """,
        params={"factor": "2"},
    )


def test_batch_scale_skipped_when_the_batch_is_on_the_command_line() -> None:
    assert_skipped(
        "batch-scale",
        'p.add_argument("--batch-size", type=int, default=32)\n',
        "given on the command line",
        script_args=("--batch-size", "16"),
    )


# -- mixed-precision -------------------------------------------------------------------------------
MP_BEFORE = """
import tensorflow as tf
from tensorflow import keras

model = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(2)])
optimizer = keras.optimizers.SGD(0.1)
with tf.GradientTape() as tape:
    loss = loss_fn(y, model(x))
grads = tape.gradient(loss, model.trainable_variables)
optimizer.apply_gradients(zip(grads, model.trainable_variables))
"""


def test_mixed_bfloat16_on_a_bf16_cpu_keeps_the_output_float32() -> None:
    assert_codemod(
        "mixed-precision",
        MP_BEFORE,
        MP_BEFORE.replace(
            "from tensorflow import keras\n",
            'from tensorflow import keras\n\nkeras.mixed_precision.set_global_policy("mixed_bfloat16")\n',
        ).replace("keras.layers.Dense(2)", 'keras.layers.Dense(2, dtype="float32")'),
        hardware=Hardware(cpu_bf16=True),
    )


def test_mixed_float16_on_tensor_cores_adds_loss_scaling_in_a_custom_loop() -> None:
    status, code, _, reason = apply(
        "mixed-precision", MP_BEFORE, hardware=Hardware(gpu_compute_capability=(8.0,))
    )
    assert status == "changed", reason
    assert 'set_global_policy("mixed_float16")' in code
    assert "optimizer = keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(0.1))" in code
    assert "tape.gradient(optimizer.scale_loss(loss), model.trainable_variables)" in code


def test_mixed_precision_never_where_it_slows_down() -> None:
    assert_skipped("mixed-precision", MP_BEFORE, "CPU without bfloat16", hardware=Hardware(cpu_bf16=False))
    assert_skipped(
        "mixed-precision",
        MP_BEFORE,
        "without tensor cores",
        hardware=Hardware(gpu_models=("Tesla P100",), gpu_compute_capability=(6.0,)),
    )
    assert_skipped(
        "mixed-precision",
        MP_BEFORE.replace("model =", 'keras.mixed_precision.set_global_policy("float32")\nmodel ='),
        "sets a dtype policy itself",
        hardware=Hardware(cpu_bf16=True),
    )


def test_a_float16_policy_on_a_cpu_is_replaced_in_place() -> None:
    """A GPU script's mixed_float16 on a CPU (TFD404): mixed_bfloat16 where the CPU has bf16, float32
    otherwise; the output layer kept float32 for bf16; a LossScaleOptimizer left, with a word."""
    FP16 = Facts(dtype_policy="mixed_float16")  # what the run's facts say
    fp16 = MP_BEFORE.replace(
        "from tensorflow import keras\n",
        'from tensorflow import keras\n\nkeras.mixed_precision.set_global_policy("mixed_float16")\n',
    )
    status, code, warnings, reason = apply(
        "mixed-precision", fp16, hardware=Hardware(cpu_bf16=True), facts=FP16
    )
    assert status == "changed", reason
    assert 'set_global_policy("mixed_bfloat16")' in code and "mixed_float16" not in code
    assert 'keras.layers.Dense(2, dtype="float32")' in code
    assert reason.startswith("dtype policy 'mixed_float16' → 'mixed_bfloat16' (line 4)")
    status, code, _, reason = apply("mixed-precision", fp16, hardware=Hardware(cpu_bf16=False), facts=FP16)
    assert status == "changed" and 'set_global_policy("float32")' in code, reason
    assert "keras.layers.Dense(2)" in code  # float32 everywhere: nothing to keep
    # the older guide's Policy object, and a custom loop's loss scaling left in place
    policy_obj = fp16.replace(
        'keras.mixed_precision.set_global_policy("mixed_float16")',
        "policy = keras.mixed_precision.Policy('mixed_float16')\nkeras.mixed_precision.set_global_policy(policy)",
    ).replace(
        "keras.optimizers.SGD(0.1)", "keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD(0.1))"
    )
    status, code, warnings, reason = apply(
        "mixed-precision", policy_obj, hardware=Hardware(cpu_bf16=True), facts=FP16
    )
    assert status == "changed" and "Policy('mixed_bfloat16')" in code, reason
    assert any("LossScaleOptimizer stays" in w for w in warnings)
    # on a GPU the script's own policy is its own
    assert_skipped(
        "mixed-precision",
        fp16,
        "already training with mixed_float16",
        hardware=Hardware(gpu_compute_capability=(8.0,)),
        facts=FP16,
    )


def test_cpu_bf16_detection_reads_the_flags(tmp_path: Path) -> None:
    from tfdoctor.fixes._base import cpu_has_bf16

    yes, no = tmp_path / "yes", tmp_path / "no"
    yes.write_text("processor: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile\n")
    no.write_text("processor: 0\nflags\t\t: fpu sse avx2\n")
    assert cpu_has_bf16(yes) and not cpu_has_bf16(no) and not cpu_has_bf16(tmp_path / "missing")


# -- the examples ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("script", "changed"),
    [
        (
            "naive_loop.py",
            {"tf-function", "generator-prefetch", "generator-cache", "batch-scale", "mixed-precision"},
        ),
        (
            "tfdata_loop.py",
            {
                "tf-function",
                "tfdata-parallel-map",
                "tfdata-prefetch",
                "tfdata-cache",
                "batch-scale",
                "mixed-precision",
            },
        ),
        # preprocess() = decode() (deterministic) then augment() (random): split, decode cached
        ("function_loop.py", {"tfdata-cache", "xla-jit", "batch-scale", "mixed-precision"}),
        ("mlp_loop.py", {"xla-jit", "batch-scale", "mixed-precision"}),
        (
            "keras_fit.py",
            {"steps-per-execution", "tfdata-cache", "xla-jit", "batch-scale", "mixed-precision"},
        ),
        ("expert.py", {"batch-scale", "mixed-precision"}),
    ],
)
def test_which_fixes_find_their_pattern_in_each_example(script: str, changed: set[str]) -> None:
    src = (EXAMPLES / script).read_text()
    ctx = FixContext(hardware=Hardware(cpu_bf16=True), filename=script)
    got = set()
    for fix in all_fixes():
        out = fix.apply(src, ctx)
        assert out.status != "failed", (fix.ID, out.reason)
        if out.changed:
            ast.parse(out.code)
            got.add(fix.ID)
    assert got == changed


def test_one_cache_per_pipeline_after_its_last_deterministic_assignment() -> None:
    """``ds = ds.map(load); ds = ds.map(set_shapes)``: each assignment alone is worth a cache, and both got
    one (two copies of the decoded data in memory). The later one replaces the one above it that builds
    what it reads; a pipeline of the same name in another function keeps its own."""
    warnings = assert_codemod(
        "tfdata-cache",
        """
        import tensorflow as tf
        def load(v):
            return tf.cast(v, tf.float32) / 255.0
        def set_shapes(v):
            return tf.reshape(v, [4])
        def train_data(x):
            ds = tf.data.Dataset.from_tensor_slices(x)
            ds = ds.map(load)
            ds = ds.map(set_shapes)
            return ds.shuffle(100).batch(8)
        def val_data(y):
            ds = tf.data.Dataset.from_tensor_slices(y)
            ds = ds.map(load)
            return ds.batch(8)
        """,
        """
        import tensorflow as tf
        def load(v):
            return tf.cast(v, tf.float32) / 255.0
        def set_shapes(v):
            return tf.reshape(v, [4])
        def train_data(x):
            ds = tf.data.Dataset.from_tensor_slices(x)
            ds = ds.map(load)
            ds = ds.map(set_shapes).cache()
            return ds.shuffle(100).batch(8)
        def val_data(y):
            ds = tf.data.Dataset.from_tensor_slices(y)
            ds = ds.map(load).cache()
            return ds.batch(8)
        """,
    )
    memory = [w for w in warnings if "the cache holds the decoded elements" in w]
    assert [w.split(":")[0] for w in memory] == ["line 9", "line 13"]  # none for line 8
    out = outcome("tfdata-cache", "import tensorflow as tf\n")
    assert out.status == "skipped"


def test_cache_follows_the_python_function_a_numpy_function_runs() -> None:
    """``tf.numpy_function(func=read_data_fn, ...)`` runs read_data_fn every epoch: its body decides. A
    draw of np.random inside it was cached (the noise frozen after the first epoch); a deterministic
    np.load is cached; a function from elsewhere cannot be told."""
    loader = """
        import numpy as np
        import tensorflow as tf
        def read_data_fn(path, label):
            image = np.load(path.decode("utf-8"))
            image = image + np.random.normal(size=image.shape)
            return image.astype(np.float32), label
        def load(path, label):
            return tf.numpy_function(func=read_data_fn, inp=[path, label], Tout=[tf.float32, tf.int32])
        ds = tf.data.Dataset.from_tensor_slices((paths, labels))
        ds = ds.map(load).batch(8)
        """
    assert_skipped("tfdata-cache", loader, "draws random numbers (load → read_data_fn → np.random.normal)")
    noise = loader.replace("np.random.normal(size=image.shape)", "cv2.randn(image, 0, 1)")
    assert_skipped("tfdata-cache", noise, "draws random numbers (load → read_data_fn → cv2.randn)")
    plain = loader.replace("            image = image + np.random.normal(size=image.shape)\n", "")
    assert_codemod(
        "tfdata-cache", plain, plain.replace("ds.map(load).batch(8)", "ds.map(load).cache().batch(8)")
    )
    elsewhere = plain.replace("func=read_data_fn", "func=reader.read").replace(
        "ds.map(load)", "ds.map(lambda p, l: tf.py_function(decode_sample, [p, l], [tf.float32, tf.int32]))"
    )
    assert_skipped("tfdata-cache", elsewhere, "calls a function tfdoctor cannot inspect")


def test_cache_moves_a_shuffle_statement_below_the_deterministic_loads_it_ran_before() -> None:
    """User loaders shuffle the paths, then load them in later statements (``if training: ds =
    ds.shuffle(n)``, then ``ds = ds.map(load)``): a cache after the loads would replay the first epoch's
    order, so the shuffle statement moves below them (they are element-wise and deterministic: it then
    permutes the same elements) and the cache follows the last of them."""
    loader = """
        import numpy as np
        import tensorflow as tf
        def read(path, label):
            image = np.load(path.decode("utf-8"))
            return image.astype(np.float32), label
        def load(path, label):
            return tf.numpy_function(func=read, inp=[path, label], Tout=[tf.float32, tf.int32])
        def shapes(image, label):
            image.set_shape([32, 32])
            return image, label
        def flip(image, label):
            return tf.image.random_flip_left_right(image), label
        def get_dataset(paths, labels, training=False):
            ds = tf.data.Dataset.from_tensor_slices((paths, labels))
            if training:
                ds = ds.shuffle(len(paths))
            ds = ds.map(load)
            ds = ds.map(shapes)
            if training:
                ds = ds.map(flip)
            return ds.batch(8)
        """
    moved = loader.replace(
        """            if training:
                ds = ds.shuffle(len(paths))
            ds = ds.map(load)
            ds = ds.map(shapes)
""",
        """            ds = ds.map(load)
            ds = ds.map(shapes).cache()
            if training:
                ds = ds.shuffle(len(paths))
""",
    )
    warnings = assert_codemod("tfdata-cache", loader, moved)
    assert warnings[0].startswith(
        "line 16: the shuffle moved below the cache at line 18, after map(load), map(shapes)"
    )
    reason = outcome("tfdata-cache", loader).reason
    assert (
        reason
        == "cache() after map(load), map(shapes) of ds (line 18), the shuffle of line 16 moved below it"
    )
    # at module level, a shuffle alone in its statement
    flat = """
        import tensorflow as tf
        def scale(x):
            return tf.cast(x, tf.float32) / 255.0
        ds = tf.data.Dataset.from_tensor_slices(images)
        ds = ds.shuffle(1000)
        ds = ds.map(scale)
        model.fit(ds.batch(32))
        """
    assert_codemod(
        "tfdata-cache",
        flat,
        flat.replace(
            "ds = ds.shuffle(1000)\n        ds = ds.map(scale)\n",
            "ds = ds.map(scale).cache()\n        ds = ds.shuffle(1000)\n",
        ),
    )
    # the Python a py_function runs may read its file with a decoding library (PIL, cv2, librosa,
    # nibabel ...) and call methods of what it made; not a reader object the script holds
    pil = """
        import numpy as np
        import tensorflow as tf
        from PIL import Image
        def read(path):
            image = Image.open(path.numpy().decode()).convert("L")
            return np.asarray(image, dtype=np.float32) / 255.0
        def load(path):
            return tf.py_function(read, [path], tf.float32)
        ds = tf.data.Dataset.from_tensor_slices(paths)
        ds = ds.shuffle(len(paths))
        ds = ds.map(load)
        model.fit(ds.batch(32))
        """
    assert outcome("tfdata-cache", pil).reason.endswith("(line 11), the shuffle of line 10 moved below it")
    held = pil.replace('Image.open(path.numpy().decode()).convert("L")', "READER.read(path.numpy())").replace(
        "def read(path):", "READER = Reader()\n        def read(path):"
    )
    assert "already ran shuffle()" in outcome("tfdata-cache", held).reason
    # left where it is, with the advice, when moving it could change what the pipeline does
    not_moved = {
        "a random map between": flat.replace(
            "ds = ds.shuffle(1000)",
            "ds = ds.shuffle(1000)\n        ds = ds.map(tf.image.random_flip_left_right)",
        ),
        "a filter between": flat.replace(
            "ds = ds.map(scale)", "ds = ds.filter(lambda x: x[0, 0] > 0)\n        ds = ds.map(scale)"
        ),
        "a shuffle that reads the pipeline": flat.replace("shuffle(1000)", "shuffle(ds.cardinality())"),
        "a shuffle under an if with an else": flat.replace(
            "ds = ds.shuffle(1000)",
            "if training:\n            ds = ds.shuffle(1000)\n        else:\n            ds = ds.take(10)",
        ),
        "a shuffle sharing its line": flat.replace("ds = ds.shuffle(1000)", "ds = ds.shuffle(1000); n = 1"),
        "a load with state of its own": flat.replace(
            "return tf.cast(x, tf.float32) / 255.0",
            "return tf.numpy_function(func=memo, inp=[x], Tout=tf.float32)",
        ).replace(
            "def scale(x):",
            "SEEN = {}\n        def memo(x):\n            SEEN[len(SEEN)] = x\n            return x\n        def scale(x):",
        ),
    }
    for case, src in not_moved.items():
        out = outcome("tfdata-cache", src)
        assert out.status == "skipped" and "already ran shuffle()" in out.reason, (case, out.reason)


# -- host-calls ------------------------------------------------------------------------------------
def _host(api: str, code: str, line: int = 1) -> HostCall:
    return HostCall(api=api, site=f"agent.py:{line}", code=code, calls=48, seconds=0.05, timed_steps=24)


def test_host_calls_makes_a_numpy_weight_copy_a_tf_function_and_wraps_the_eager_model_call() -> None:
    """keras-io's DDPG (Keras 3): update_target() through get_weights()/set_weights() each step and the
    actor called eagerly to act; a method of an agent class copying its own targets the same way."""
    facts = Facts(
        host_calls=[
            _host("get_weights", "target_weights = target.get_weights()"),
            _host("set_weights", "self.target.set_weights(new)"),
            _host("call", "sampled_actions = tf.squeeze(actor_model(state))"),
            _host("call", "q = self.q_net(obs, training=False)"),
        ]
    )
    assert_codemod(
        "host-calls",
        """
        import numpy as np
        import tensorflow as tf


        def update_target(target, original, tau):
            target_weights = target.get_weights()
            original_weights = original.get_weights()

            for i in range(len(target_weights)):
                target_weights[i] = original_weights[i] * tau + target_weights[i] * (1 - tau)

            target.set_weights(target_weights)


        class Agent:
            def soft_update(self):
                new = [self.tau * w + (1 - self.tau) * t for w, t in zip(self.q_net.get_weights(), self.target.get_weights())]
                self.target.set_weights(new)

            def act(self, obs):
                q = self.q_net(obs, training=False)
                return int(np.argmax(q))


        def policy(state, noise_object):
            sampled_actions = tf.squeeze(actor_model(state))
            return sampled_actions.numpy() + noise_object()
        """,
        """
        import numpy as np
        import tensorflow as tf


        @tf.function(reduce_retracing=True)
        def graph_call(model, *args, **kwargs):
            \"\"\"tfdoctor host-calls: the model run as one graph, not op by op.\"\"\"
            return model(*args, **kwargs)


        @tf.function
        def update_target(target, original, tau):
            target_weights = [tf.convert_to_tensor(_w) for _w in target.weights]
            original_weights = [tf.convert_to_tensor(_w) for _w in original.weights]

            for i in range(len(target_weights)):
                target_weights[i] = original_weights[i] * tau + target_weights[i] * (1 - tau)

            for _v, _w in zip(target.weights, target_weights):
                _v.assign(_w)


        class Agent:
            @tf.function
            def soft_update(self):
                new = [self.tau * w + (1 - self.tau) * t for w, t in zip([tf.convert_to_tensor(_w) for _w in self.q_net.weights], [tf.convert_to_tensor(_w) for _w in self.target.weights])]
                for _v, _w in zip(self.target.weights, new):
                    _v.assign(_w)

            def act(self, obs):
                q = graph_call(self.q_net, obs, training=False)
                return int(np.argmax(q))


        def policy(state, noise_object):
            sampled_actions = tf.squeeze(graph_call(actor_model, state))
            return sampled_actions.numpy() + noise_object()
        """,
        facts=facts,
    )
    out = outcome(
        "host-calls",
        "import tensorflow as tf\n\ndef f(t, o):\n    t.set_weights(o.get_weights())\n",
        facts=facts,
    )
    assert out.status == "skipped"  # the lines the run saw are not in this file


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            "    w = [np.clip(a, -1, 1) for a in o.get_weights()]\n    t.set_weights(w)\n",
            "it calls np.clip()",
        ),
        ("    w = o.get_weights()\n    t.set_weights(w)\n    return w\n", "it returns a value"),
        ("    w = o.get_weights()\n    print(len(w))\n    t.set_weights(w)\n", "it calls print()"),
        ("    w = o.get_weights()\n    ok = t.set_weights(w)\n", "its set_weights() result is used"),
        ("    w = o.get_weights()\n    t.set_weights(w); n = 1\n", "shares its line"),
    ],
)
def test_host_calls_leaves_a_weight_function_that_needs_python_with_the_reason(body: str, why: str) -> None:
    src = "import numpy as np\nimport tensorflow as tf\n\n\ndef update(t, o):\n" + body
    facts = Facts(host_calls=[_host("get_weights", body.splitlines()[0].strip())])
    status, code, _, reason = apply("host-calls", src, facts=facts)
    assert status == "skipped" and code == src
    assert reason.startswith("update() (its get_weights() at line 6): ") and why in reason, reason


def test_host_calls_needs_one_call_that_can_be_a_models_and_the_calls_in_the_facts() -> None:
    src = """
    import tensorflow as tf

    a = policy_net(encoder(obs))
    b = tf.squeeze(obs.numpy())
    """
    facts = Facts(host_calls=[_host("call", "a = policy_net(encoder(obs))", 3)])
    assert_skipped("host-calls", src, "the model call at line 3: 2 calls that may be a model's", facts=facts)
    facts = Facts(host_calls=[_host("call", "b = tf.squeeze(obs.numpy())", 4)])
    assert_skipped("host-calls", src, "the model call at line 4: no call of a model", facts=facts)
    assert_skipped("host-calls", src, "no get_weights() / set_weights() or eager model call", facts=Facts())
    # seen in the warm-up only (no call in the timing window): nothing to move
    quiet = HostCall(api="call", site="agent.py:3", code="a = policy_net(encoder(obs))", calls=0)
    assert_skipped("host-calls", src, "no get_weights()", facts=Facts(host_calls=[quiet]))


def test_host_calls_imports_tensorflow_where_the_script_only_imports_keras() -> None:
    facts = Facts(host_calls=[_host("set_weights", "target.set_weights(model.get_weights())")])
    status, code, _, reason = apply(
        "host-calls",
        """
        import keras


        def sync(target, model):
            target.set_weights(model.get_weights())
        """,
        facts=facts,
    )
    assert status == "changed", reason
    assert code.startswith("import keras\nimport tensorflow as tf\n")
    assert (
        "    for _v, _w in zip(target.weights, [tf.convert_to_tensor(_w) for _w in model.weights]):" in code
    )
