"""An eager custom loop whose batches are padded to their own longest sequence (dynamic padding)."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
sequences = [rng.integers(1, 500, size=rng.integers(3, 40)).tolist() for _ in range(2048)]
labels = np.array([int(np.mean(s) > 250) for s in sequences])

model = tf.keras.Sequential(
    [
        tf.keras.layers.Embedding(500, 16, mask_zero=True),
        tf.keras.layers.GlobalAveragePooling1D(),
        tf.keras.layers.Dense(1),
    ]
)
optimizer = tf.keras.optimizers.Adam(1e-3)
loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True)

for i in range(0, len(sequences), 32):
    x = tf.keras.utils.pad_sequences(sequences[i : i + 32], padding="post")
    y = labels[i : i + 32]
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
