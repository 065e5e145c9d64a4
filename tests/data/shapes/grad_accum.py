"""A custom loop with gradient accumulation (the shape of many user repositories: several batches'
gradients summed before one optimizer step)."""

import numpy as np
import tensorflow as tf

ACCUM_STEPS = 4
BATCH_SIZE = 32
EPOCHS = 20

rng = np.random.default_rng(0)
x_train = rng.normal(size=(4096, 64)).astype("float32")
y_train = (x_train[:, :8].sum(axis=1) > 0).astype("int64")
train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(4096).batch(BATCH_SIZE)

model = tf.keras.Sequential(
    [
        tf.keras.Input((64,)),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(2),
    ]
)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = tf.keras.optimizers.Adam(1e-3)

accum = [tf.zeros_like(v) for v in model.trainable_variables]
for epoch in range(EPOCHS):
    total = 0.0
    for step, (x, y) in enumerate(train_ds):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits) / ACCUM_STEPS
        grads = tape.gradient(loss, model.trainable_variables)
        accum = [a + g for a, g in zip(accum, grads)]
        if (step + 1) % ACCUM_STEPS == 0:
            optimizer.apply_gradients(zip(accum, model.trainable_variables))
            accum = [tf.zeros_like(v) for v in model.trainable_variables]
        total += float(loss)
    print(f"epoch {epoch}: loss {total / (step + 1):.4f}")
