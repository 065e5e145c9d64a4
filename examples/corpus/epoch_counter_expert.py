"""Expert twin of epoch_counter.py: the same autoencoder, batch size (64), Adam(1e-3), noise schedule
and float32, but the step is a ``tf.function`` that takes the noise level as a tensor (traced once),
and the pipeline prefetches.

    python examples/corpus/epoch_counter_expert.py --epochs 1
"""

import argparse
import time

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=40)
args = parser.parse_args()

keras.utils.set_random_seed(3)
rng = np.random.default_rng(3)
basis = rng.normal(size=(12, 96)).astype("float32")
data = (rng.normal(size=(6144, 12)).astype("float32") @ basis) / 3.0
dataset = tf.data.Dataset.from_tensor_slices(data).shuffle(6144).batch(64).prefetch(tf.data.AUTOTUNE)

encoder = keras.Sequential(
    [keras.Input((96,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(24)]
)
decoder = keras.Sequential(
    [keras.Input((24,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(96)]
)
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
variables = encoder.trainable_variables + decoder.trainable_variables


@tf.function
def train_step(batch, noise):
    with tf.GradientTape() as tape:
        noisy = batch + tf.random.normal(tf.shape(batch)) * noise
        recon = decoder(encoder(noisy, training=True), training=True)
        loss = tf.reduce_mean(tf.square(recon - batch))
    grads = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(grads, variables))
    return loss


for epoch in range(args.epochs):
    start = time.perf_counter()
    total = 0.0
    steps = 0
    for batch in dataset:
        loss = train_step(batch, tf.constant(0.5 / (1 + epoch), tf.float32))
        total += float(loss)
        steps += 1
    ms = 1000 * (time.perf_counter() - start) / steps
    print(f"epoch {epoch}: reconstruction loss {total / steps:.4f} ({ms:.1f} ms/step)")
