"""Overfit and underfit: the shape of TensorFlow's tutorial (a CsvDataset packed in batches, a
compile_and_fit helper called for several models, an InverseTimeDecay schedule counted in steps per
epoch, callbacks printing dots, TensorBoard logs)."""

import gzip
import os
import pathlib
import shutil
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers, regularizers

logdir = pathlib.Path(tempfile.mkdtemp()) / "tensorboard_logs"
shutil.rmtree(logdir, ignore_errors=True)

gz = "HIGGS_small.csv.gz"
if not os.path.exists(gz):
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(12000, 29))
    rows[:, 0] = (rows[:, 1] + rows[:, 2] > 0).astype(float)
    with gzip.open(gz, "wt") as f:
        for r in rows:
            f.write(",".join(f"{v:.5f}" for v in r) + "\n")

FEATURES = 28
ds = tf.data.experimental.CsvDataset(gz, [float()] * (FEATURES + 1), compression_type="GZIP")


def pack_row(*row):
    label = tf.expand_dims(row[0], -1)
    features = tf.stack(row[1:], 1)
    return features, label


packed_ds = ds.batch(10000).map(pack_row).unbatch()

N_VALIDATION = int(1e3)
N_TRAIN = int(1e4)
BUFFER_SIZE = int(1e4)
BATCH_SIZE = 500
STEPS_PER_EPOCH = N_TRAIN // BATCH_SIZE

validate_ds = packed_ds.take(N_VALIDATION).cache()
train_ds = packed_ds.skip(N_VALIDATION).take(N_TRAIN).cache()

validate_ds = validate_ds.batch(BATCH_SIZE)
train_ds = train_ds.shuffle(BUFFER_SIZE).repeat().batch(BATCH_SIZE)

lr_schedule = tf.keras.optimizers.schedules.InverseTimeDecay(
    0.001, decay_steps=STEPS_PER_EPOCH * 1000, decay_rate=1, staircase=False
)


def get_optimizer():
    return tf.keras.optimizers.Adam(lr_schedule)


def get_callbacks(name):
    return [
        tf.keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: print(".", end="", flush=True)),
        tf.keras.callbacks.EarlyStopping(monitor="val_binary_crossentropy", patience=200),
        tf.keras.callbacks.TensorBoard(logdir / name),
    ]


def compile_and_fit(model, name, optimizer=None, max_epochs=10000):
    if optimizer is None:
        optimizer = get_optimizer()
    model.compile(
        optimizer=optimizer,
        loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[tf.keras.metrics.BinaryCrossentropy(from_logits=True, name="binary_crossentropy"), "accuracy"],
    )

    model.summary()

    history = model.fit(
        train_ds,
        steps_per_epoch=STEPS_PER_EPOCH,
        epochs=max_epochs,
        validation_data=validate_ds,
        callbacks=get_callbacks(name),
        verbose=0,
    )
    return history


tiny_model = tf.keras.Sequential([layers.Dense(16, activation="elu", input_shape=(FEATURES,)), layers.Dense(1)])

size_histories = {}
size_histories["Tiny"] = compile_and_fit(tiny_model, "sizes/Tiny")

l2_model = tf.keras.Sequential(
    [
        layers.Dense(512, activation="elu", kernel_regularizer=regularizers.l2(0.001), input_shape=(FEATURES,)),
        layers.Dense(512, activation="elu", kernel_regularizer=regularizers.l2(0.001)),
        layers.Dense(1),
    ]
)
size_histories["l2"] = compile_and_fit(l2_model, "regularizers/l2")
