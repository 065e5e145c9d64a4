"""Expert twin of multifile/train.py: the same ``model.py`` (model, SGD optimizer, data), batch size
64, float32. The step is a ``@tf.function`` and the batches come from a cached, prefetched tf.data
pipeline (the same shuffle-per-epoch order semantics).

    python examples/corpus/multifile/train_expert.py --epochs 1
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

train_ds = (
    tf.data.Dataset.from_tensor_slices((x_train, y_train))
    .cache()
    .shuffle(len(x_train), seed=5)
    .batch(args.batch_size, drop_remainder=True)
    .prefetch(tf.data.AUTOTUNE)
)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(y, logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(args.epochs):
    start = time.time()
    losses = []
    for i, (x, y) in enumerate(train_ds):
        loss = train_step(x, y)
        losses.append(loss)
        if i % 50 == 0:
            print(f"epoch {epoch} step {i}: loss {float(loss):.4f}")
    elapsed = time.time() - start
    print(f"epoch {epoch}: mean loss {float(np.mean(losses)):.4f} ({1000 * elapsed / (i + 1):.1f} ms/step)")
