"""The entry point of a package-shaped repository (``python -m trainer.train --epochs 3``): relative
imports of the model and the data beside it, argparse settings, an eager GradientTape loop."""

import argparse

import tensorflow as tf

from . import data
from .model import build_model, make_optimizer


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    return parser.parse_args()


def main():
    args = parse_args()
    tf.random.set_seed(0)
    ds = data.make_dataset(args.batch_size)
    model = build_model()
    optimizer = make_optimizer()
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for epoch in range(args.epochs):
        total, n = 0.0, 0
        for x, y in ds:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            total, n = total + float(loss), n + 1
        print(f"epoch {epoch + 1}: loss {total / n:.4f}")


if __name__ == "__main__":
    main()
