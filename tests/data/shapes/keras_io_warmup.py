"""keras-io's Keras 3 warm-up (as in its Transformer and ViT examples): CosineDecay from 0.0 to a
warmup_target over warmup_steps, steps counted as EPOCHS * len(train_ds); AdamW; fit on tf.data."""

import keras
import numpy as np
import tensorflow as tf

BATCH_SIZE = 64
EPOCHS = 3

rng = np.random.default_rng(0)
x = rng.standard_normal((4096, 64)).astype("float32")
y = rng.integers(0, 10, 4096)
train_ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096).batch(BATCH_SIZE)

total_steps = EPOCHS * len(train_ds)
warmup_steps = int(0.1 * total_steps)
schedule = keras.optimizers.schedules.CosineDecay(
    initial_learning_rate=0.0,
    decay_steps=total_steps - warmup_steps,
    warmup_target=1e-3,
    warmup_steps=warmup_steps,
)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="gelu"), keras.layers.Dense(10)])
model.compile(
    optimizer=keras.optimizers.AdamW(learning_rate=schedule, weight_decay=1e-4),
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)
model.fit(train_ds, epochs=EPOCHS)
