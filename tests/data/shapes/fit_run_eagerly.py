"""A fit script with a debugging leftover: compile(run_eagerly=True)."""
import numpy as np
import tensorflow as tf

(x_train, y_train) = (np.random.rand(8192, 64).astype("float32"), np.random.randint(0, 10, 8192))
model = tf.keras.Sequential([
    tf.keras.layers.Input((64,)),
    tf.keras.layers.Dense(128, activation="relu"),
    tf.keras.layers.Dense(128, activation="relu"),
    tf.keras.layers.Dense(10),
])
model.compile(
    optimizer="adam",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
    run_eagerly=True,  # for debugging
)
model.fit(x_train, y_train, batch_size=32, epochs=2)
