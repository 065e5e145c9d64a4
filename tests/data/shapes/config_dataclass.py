"""Shape of ordinary user repositories that keep their settings in a config dataclass (``train.py`` with a
``@dataclass TrainConfig``, overridable from the command line field by field, a ``build_model(cfg)`` and a
``make_datasets(cfg)``), as GitHub projects write it; synthetic CIFAR-sized data."""
import argparse
from dataclasses import dataclass, fields

import numpy as np
import tensorflow as tf
from tensorflow import keras


@dataclass
class TrainConfig:
    batch_size: int = 64
    learning_rate: float = 3e-4
    epochs: int = 20
    num_classes: int = 10
    image_size: int = 32
    dropout: float = 0.3
    seed: int = 42


def parse_args() -> TrainConfig:
    cfg = TrainConfig()
    parser = argparse.ArgumentParser()
    for f in fields(cfg):
        parser.add_argument(f"--{f.name}", type=type(getattr(cfg, f.name)), default=None)
    args = parser.parse_args()
    for f in fields(cfg):
        value = getattr(args, f.name)
        if value is not None:
            setattr(cfg, f.name, value)
    return cfg


def make_datasets(cfg: TrainConfig):
    rng = np.random.default_rng(cfg.seed)
    n = 6000
    y = rng.integers(0, cfg.num_classes, n)
    x = rng.normal(0.0, 1.0, (n, cfg.image_size, cfg.image_size, 3)).astype("float32")
    x[np.arange(n), y, :, 0] += 3.0
    split = int(0.9 * n)
    train = (
        tf.data.Dataset.from_tensor_slices((x[:split], y[:split]))
        .shuffle(split, seed=cfg.seed)
        .batch(cfg.batch_size)
        .prefetch(tf.data.AUTOTUNE)
    )
    val = tf.data.Dataset.from_tensor_slices((x[split:], y[split:])).batch(cfg.batch_size)
    return train, val


def build_model(cfg: TrainConfig) -> keras.Model:
    inputs = keras.Input((cfg.image_size, cfg.image_size, 3))
    x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dropout(cfg.dropout)(x)
    outputs = keras.layers.Dense(cfg.num_classes)(x)
    return keras.Model(inputs, outputs)


def main():
    cfg = parse_args()
    keras.utils.set_random_seed(cfg.seed)
    train_ds, val_ds = make_datasets(cfg)
    model = build_model(cfg)
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=cfg.learning_rate, weight_decay=1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(train_ds, validation_data=val_ds, epochs=cfg.epochs, verbose=2)


if __name__ == "__main__":
    main()
