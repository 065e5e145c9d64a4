"""Shape of a user repository's custom training loop (the way many TF2 projects on GitHub write one):
``main()`` with argparse, a ``keras.Model`` subclass, a ``Trainer``-less loop with a ``@tf.function``
``train_step`` that logs ``tf.summary`` scalars at ``optimizer.iterations``, ``keras.utils.Progbar`` per
epoch updated with the loss every step, a validation pass, and a ``tf.train.CheckpointManager`` saving
each epoch. Synthetic tabular data (20 features, 5 classes)."""
import argparse
import os
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow import keras


class MLP(keras.Model):
    def __init__(self, hidden=256, num_classes=5):
        super().__init__()
        self.d1 = keras.layers.Dense(hidden, activation="relu")
        self.d2 = keras.layers.Dense(hidden, activation="relu")
        self.drop = keras.layers.Dropout(0.1)
        self.out = keras.layers.Dense(num_classes)

    def call(self, x, training=False):
        x = self.d1(x)
        x = self.drop(x, training=training)
        x = self.d2(x)
        return self.out(x)


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 20)).astype("float32")
    w = np.random.default_rng(42).normal(size=(20, 5)).astype("float32")
    y = np.argmax(x @ w + 0.5 * rng.normal(size=(n, 5)), axis=1).astype("int64")
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--logdir", default=os.path.join(tempfile.gettempdir(), "progbar_loop"))
    args = parser.parse_args()

    x_train, y_train = make_data(16384, 0)
    x_val, y_val = make_data(2048, 1)
    train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(4096).batch(args.batch_size)
    val_ds = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(256)

    model = MLP()
    optimizer = keras.optimizers.Adam(learning_rate=args.lr)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    train_acc = keras.metrics.SparseCategoricalAccuracy()
    val_acc = keras.metrics.SparseCategoricalAccuracy()
    writer = tf.summary.create_file_writer(args.logdir)
    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)
    manager = tf.train.CheckpointManager(ckpt, os.path.join(args.logdir, "ckpt"), max_to_keep=2)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        train_acc.update_state(y, logits)
        with writer.as_default():
            tf.summary.scalar("loss", loss, step=optimizer.iterations)
        return loss

    @tf.function
    def val_step(x, y):
        val_acc.update_state(y, model(x, training=False))

    steps = int(np.ceil(len(x_train) / args.batch_size))
    for epoch in range(args.epochs):
        print(f"Epoch {epoch + 1}/{args.epochs}")
        progbar = keras.utils.Progbar(steps, stateful_metrics=["acc"])
        for i, (x, y) in enumerate(train_ds):
            loss = train_step(x, y)
            progbar.update(i + 1, values=[("loss", float(loss)), ("acc", float(train_acc.result()))])
        for x, y in val_ds:
            val_step(x, y)
        print(f"val_acc: {float(val_acc.result()):.4f}")
        train_acc.reset_state()
        val_acc.reset_state()
        manager.save()


if __name__ == "__main__":
    main()
