"""An eager text classifier loop with dynamic padding: each batch padded to its own longest sequence
(as many NLP repositories write it, to save compute on short batches)."""
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
VOCAB = 2000
sequences = [rng.integers(1, VOCAB, size=rng.integers(5, 120)).tolist() for _ in range(6000)]
labels = np.array([int(np.mean(s) > VOCAB / 2) for s in sequences])


def batches(batch_size=32):
    order = rng.permutation(len(sequences))
    for i in range(0, len(order) - batch_size + 1, batch_size):
        idx = order[i : i + batch_size]
        batch = tf.keras.utils.pad_sequences([sequences[j] for j in idx], padding="post")
        yield batch, labels[idx]


model = tf.keras.Sequential(
    [
        tf.keras.layers.Embedding(VOCAB, 64, mask_zero=True),
        tf.keras.layers.GlobalAveragePooling1D(),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(1),
    ]
)
optimizer = tf.keras.optimizers.Adam(1e-3)
loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True)

for epoch in range(3):
    total = 0.0
    for step, (x, y) in enumerate(batches()):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        total += float(loss)
    print(f"epoch {epoch}: loss {total / (step + 1):.4f}")
