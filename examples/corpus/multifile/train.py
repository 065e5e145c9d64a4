"""The training half of a two-file project: imports ``model.py`` beside it (model, optimizer
factory, data) and trains with an eager GradientTape loop over numpy batches.

    python examples/corpus/multifile/train.py --epochs 1
    tfdoctor profile examples/corpus/multifile/train.py
"""

import argparse
import time

import model as mnist
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=64)
args = parser.parse_args()

tf.keras.utils.set_random_seed(5)

x_train, y_train = mnist.make_data()
x_train = x_train.astype("float32") / 255.0

model = mnist.build_model()
optimizer = mnist.make_optimizer()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
rng = np.random.default_rng(5)


def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(y, logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(args.epochs):
    perm = rng.permutation(len(x_train))
    start = time.time()
    losses = []
    steps = len(perm) // args.batch_size
    for i in range(steps):
        idx = perm[i * args.batch_size : (i + 1) * args.batch_size]
        loss = train_step(x_train[idx], y_train[idx])
        losses.append(float(loss))
        if i % 50 == 0:
            print(f"epoch {epoch} step {i}: loss {loss:.4f}")
    elapsed = time.time() - start
    print(f"epoch {epoch}: mean loss {np.mean(losses):.4f} ({1000 * elapsed / steps:.1f} ms/step)")
