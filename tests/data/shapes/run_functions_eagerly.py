"""A custom loop whose tf.function step runs eagerly: run_functions_eagerly(True) left from debugging."""
import numpy as np
import tensorflow as tf

tf.config.run_functions_eagerly(True)

x = np.random.rand(4096, 64).astype("float32")
y = np.random.randint(0, 10, 4096)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
model = tf.keras.Sequential([tf.keras.layers.Input((64,)), tf.keras.layers.Dense(128, activation="relu"),
                             tf.keras.layers.Dense(10)])
opt = tf.keras.optimizers.Adam()
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for epoch in range(3):
    for xb, yb in ds:
        loss = train_step(xb, yb)
    print(f"epoch {epoch}: loss {float(loss):.4f}")
