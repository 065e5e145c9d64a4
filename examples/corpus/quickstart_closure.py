"""TensorFlow 2 "quickstart for experts" shape, inside ``main()``: a subclassed ``MyModel``,
``tf.keras.optimizers.Adam()`` with its default learning rate, ``train_step`` a ``@tf.function``
closure over model/optimizer/metrics, fed by a Python generator defined in ``main`` that does
per-example numpy work (scale, 3x3 blur, noise, shift).

    python examples/corpus/quickstart_closure.py --epochs 1
    tfdoctor profile examples/corpus/quickstart_closure.py
"""

import argparse
import time

import numpy as np
import tensorflow as tf
from tensorflow.keras import Model
from tensorflow.keras.layers import Conv2D, Dense, Flatten


class MyModel(Model):
    def __init__(self):
        super().__init__()
        self.conv1 = Conv2D(32, 3, activation="relu")
        self.flatten = Flatten()
        self.d1 = Dense(128, activation="relu")
        self.d2 = Dense(10)

    def call(self, x):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        return self.d2(x)


def synthetic_mnist(n, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, size=n).astype("int64")
    x = rng.integers(0, 80, size=(n, 28, 28), dtype=np.uint8)
    for k in range(10):
        r, c = divmod(k, 4)
        x[y == k, 2 + r * 8 : 8 + r * 8, 2 + c * 6 : 8 + c * 6] = 255
    noisy = rng.random(n) < 0.1
    y[noisy] = rng.integers(0, 10, size=int(noisy.sum()))
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    tf.keras.utils.set_random_seed(0)

    x_train, y_train = synthetic_mnist(12000, seed=0)
    x_test, y_test = synthetic_mnist(2000, seed=1)
    rng = np.random.default_rng(0)

    def train_batches(batch_size):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), batch_size):
            images, labels = [], []
            for i in order[start : start + batch_size]:
                img = x_train[i].astype("float32") / 255.0
                padded = np.pad(img, 1, mode="edge")
                img = sum(padded[dy : dy + 28, dx : dx + 28] for dy in range(3) for dx in range(3)) / 9.0
                img = img + rng.normal(0.0, 0.05, size=img.shape).astype("float32")
                img = np.roll(img, rng.integers(-2, 3), axis=1)
                images.append(img[..., np.newaxis])
                labels.append(y_train[i])
            yield np.stack(images), np.array(labels)

    model = MyModel()
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.Adam()

    train_loss = tf.keras.metrics.Mean(name="train_loss")
    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
    test_loss = tf.keras.metrics.Mean(name="test_loss")
    test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            # training=True is only needed if there are layers with different
            # behavior during training versus inference (e.g. Dropout).
            predictions = model(images, training=True)
            loss = loss_object(labels, predictions)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))

        train_loss(loss)
        train_accuracy(labels, predictions)

    @tf.function
    def test_step(images, labels):
        predictions = model(images, training=False)
        t_loss = loss_object(labels, predictions)
        test_loss(t_loss)
        test_accuracy(labels, predictions)

    test_images = (x_test.astype("float32") / 255.0)[..., np.newaxis]
    for epoch in range(args.epochs):
        # Reset the metrics at the start of the next epoch
        train_loss.reset_state()
        train_accuracy.reset_state()
        test_loss.reset_state()
        test_accuracy.reset_state()

        start = time.time()
        for step, (images, labels) in enumerate(train_batches(args.batch_size)):
            train_step(images, labels)
            if step % 100 == 0:
                print(f"  step {step}: loss {float(train_loss.result()):.4f}")
        elapsed = time.time() - start

        for i in range(0, len(test_images), 256):
            test_step(test_images[i : i + 256], y_test[i : i + 256])

        print(
            f"Epoch {epoch + 1}, "
            f"Loss: {train_loss.result():.4f}, "
            f"Accuracy: {train_accuracy.result() * 100:.2f}, "
            f"Test Loss: {test_loss.result():.4f}, "
            f"Test Accuracy: {test_accuracy.result() * 100:.2f} "
            f"({1000 * elapsed / (step + 1):.1f} ms/step)"
        )


if __name__ == "__main__":
    main()
