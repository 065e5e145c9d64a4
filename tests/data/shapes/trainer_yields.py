"""A trainer class as university course templates write it: ``Trainer.train()`` is a generator that runs
the ``@tf.function`` step over the dataset itself and yields the validation accuracy every
``log_interval`` steps; ``main()`` drains it with ``for _ in trainer.train(): continue``. Checkpoints
through a ``CheckpointManager``, metrics written with ``tf.summary``.

    python tests/data/shapes/trainer_yields.py
"""

import logging
import os
import tempfile

import numpy as np
import tensorflow as tf

BATCH_SIZE = 32
NUM_CLASSES = 5


def load(n=4096, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 255, size=(n, 28, 28, 1), dtype=np.uint8)
    labels = rng.integers(0, NUM_CLASSES, size=n)
    images[np.arange(n), labels * 5, :, 0] = 255

    def preprocess(image, label):
        return tf.cast(image, tf.float32) / 255.0, label

    ds = tf.data.Dataset.from_tensor_slices((images, labels)).map(preprocess)
    ds_train = ds.take(3584).shuffle(1024).repeat().batch(BATCH_SIZE)
    ds_val = ds.skip(3584).batch(BATCH_SIZE)
    return ds_train, ds_val


def vgg_like(n_classes):
    inputs = tf.keras.Input(shape=(28, 28, 1))
    x = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
    x = tf.keras.layers.MaxPool2D()(x)
    x = tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(32, activation="relu")(x)
    outputs = tf.keras.layers.Dense(n_classes)(x)
    return tf.keras.Model(inputs, outputs, name="vgg_like")


class Trainer(object):  # noqa: UP004 (as the course templates write it)
    def __init__(self, model, ds_train, ds_val, run_dir, total_steps=600, log_interval=100, ckpt_interval=300):
        self.summary_writer = tf.summary.create_file_writer(os.path.join(run_dir, "summary"))
        self.loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.optimizer = tf.keras.optimizers.Adam()

        self.train_loss = tf.keras.metrics.Mean(name="train_loss")
        self.train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
        self.val_loss = tf.keras.metrics.Mean(name="val_loss")
        self.val_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="val_accuracy")

        self.model = model
        self.ds_train = ds_train
        self.ds_val = ds_val
        self.total_steps = total_steps
        self.log_interval = log_interval
        self.ckpt_interval = ckpt_interval

        self.ckpt = tf.train.Checkpoint(step=tf.Variable(1), optimizer=self.optimizer, net=self.model)
        self.manager = tf.train.CheckpointManager(self.ckpt, os.path.join(run_dir, "ckpts"), max_to_keep=2)

    @tf.function
    def train_step(self, images, labels):
        with tf.GradientTape() as tape:
            predictions = self.model(images, training=True)
            loss = self.loss_object(labels, predictions)
        gradients = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.model.trainable_variables))
        self.train_loss(loss)
        self.train_accuracy(labels, predictions)

    @tf.function
    def val_step(self, images, labels):
        predictions = self.model(images, training=False)
        self.val_loss(self.loss_object(labels, predictions))
        self.val_accuracy(labels, predictions)

    def train(self):
        for idx, (images, labels) in enumerate(self.ds_train):
            step = idx + 1
            self.train_step(images, labels)

            if step % self.log_interval == 0:
                self.val_loss.reset_state()
                self.val_accuracy.reset_state()
                for val_images, val_labels in self.ds_val:
                    self.val_step(val_images, val_labels)
                logging.info(
                    "Step %d, loss %.4f, accuracy %.2f, val loss %.4f, val accuracy %.2f",
                    step,
                    self.train_loss.result(),
                    self.train_accuracy.result() * 100,
                    self.val_loss.result(),
                    self.val_accuracy.result() * 100,
                )
                with self.summary_writer.as_default():
                    tf.summary.scalar("loss", self.train_loss.result(), step=step)
                    tf.summary.scalar("accuracy", self.train_accuracy.result(), step=step)
                self.train_loss.reset_state()
                self.train_accuracy.reset_state()
                yield self.val_accuracy.result().numpy()

            if step % self.ckpt_interval == 0:
                self.ckpt.step.assign_add(1)
                self.manager.save()

            if step % self.total_steps == 0:
                self.manager.save()
                return self.val_accuracy.result().numpy()


def main():
    logging.basicConfig(level=logging.INFO)
    tf.keras.utils.set_random_seed(0)
    ds_train, ds_val = load()
    model = vgg_like(NUM_CLASSES)
    trainer = Trainer(model, ds_train, ds_val, tempfile.mkdtemp(prefix="trainer_yields_"))
    for _ in trainer.train():
        continue


if __name__ == "__main__":
    main()
