"""Shape of user repositories' ``Trainer`` classes with a tqdm bar (as many TF2 projects on GitHub write one):
the tape inline in ``train_one_epoch`` looping over ``(pbar := tqdm(dataloader))``, a hand-written loader
class yielding dicts of numpy arrays (images scaled per batch in numpy), ``pbar.set_description`` with the
loss every step, post-batch callbacks, and an ``evaluate`` method. Synthetic 32x32 images, 10 classes."""
import argparse

import numpy as np
import tensorflow as tf
from tqdm import tqdm


class Loader:
    """Batches of {"image", "target"} from arrays, reshuffled every epoch."""

    def __init__(self, images, targets, batch_size, shuffle=True, seed=0):
        self.images = images
        self.targets = targets
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.images) // self.batch_size

    def __iter__(self):
        order = self.rng.permutation(len(self.images)) if self.shuffle else np.arange(len(self.images))
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            images = self.images[idx].astype("float32") / 255.0
            images = (images - images.mean(axis=(1, 2, 3), keepdims=True)) / (
                images.std(axis=(1, 2, 3), keepdims=True) + 1e-6
            )
            yield {"image": images, "target": self.targets[idx]}


class Trainer:
    """Wrapper class used in training and validation routine."""

    def __init__(self, model, optimizer, criterion):
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion
        self.epoch = 0
        self.iter = 0

    def train_one_epoch(self, dataloader, post_batch_callbacks=[]):
        for s in (pbar := tqdm(dataloader)):
            with tf.GradientTape() as tape:
                images = s["image"]
                pred_probas = self.model(images, training=True)
                loss = self.criterion(s["target"], pred_probas)

            gradients = tape.gradient(loss, self.model.trainable_weights)
            self.optimizer.apply_gradients(zip(gradients, self.model.trainable_weights))

            pbar.set_description(f"[train] loss: {loss.numpy():.3e}")

            for clbk in post_batch_callbacks:
                clbk(loss, self.iter)

            self.iter += 1

        self.epoch += 1

    def evaluate(self, dataloader):
        correct = total = 0
        for s in tqdm(dataloader, desc="[val]"):
            pred = self.model(s["image"], training=False)
            correct += int(np.sum(np.argmax(pred, axis=1) == s["target"]))
            total += len(s["target"])
        return correct / total


def build_model(num_classes=10):
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(32, 32, 3)),
            tf.keras.layers.Conv2D(32, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(num_classes, activation="softmax"),
        ]
    )


def make_images(n, seed):
    rng = np.random.default_rng(seed)
    targets = rng.integers(0, 10, size=n)
    images = rng.integers(0, 256, size=(n, 32, 32, 3)).astype("uint8")
    images[np.arange(n), targets * 3, :, :] = 255  # a learnable stripe per class
    return images, targets


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    x_train, y_train = make_images(8192, 0)
    x_val, y_val = make_images(1024, 1)
    train_loader = Loader(x_train, y_train, args.batch_size)
    val_loader = Loader(x_val, y_val, 256, shuffle=False)

    model = build_model()
    trainer = Trainer(
        model,
        tf.keras.optimizers.Adam(learning_rate=args.lr),
        tf.keras.losses.SparseCategoricalCrossentropy(),
    )
    losses = []
    for epoch in range(args.epochs):
        trainer.train_one_epoch(train_loader, post_batch_callbacks=[lambda loss, it: losses.append(float(loss))])
        acc = trainer.evaluate(val_loader)
        print(f"epoch {epoch + 1}: mean loss {np.mean(losses[-len(train_loader):]):.4f}, val acc {acc:.3f}")


if __name__ == "__main__":
    main()
