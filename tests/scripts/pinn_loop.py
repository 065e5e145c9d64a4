"""An eager physics-informed loop (pierremtb/PINNs-TF2.0's shape): inside each step, a persistent tape
takes derivatives of the model's output with respect to its *inputs* (u_x, u_xx, u_t) before the loss's
gradient with respect to the variables, and every few steps the loop logs an error through
``model.predict``. One optimizer update per iteration: ITERATIONS steps in all."""

import numpy as np
import tensorflow as tf

ITERATIONS = 14

rng = np.random.default_rng(0)
x_f = tf.constant(rng.uniform(-1, 1, (256, 1)), tf.float32)
t_f = tf.constant(rng.uniform(0, 1, (256, 1)), tf.float32)
X_u = tf.constant(rng.uniform(-1, 1, (32, 2)), tf.float32)
u = tf.constant(rng.uniform(-1, 1, (32, 1)), tf.float32)

model = tf.keras.Sequential(
    [tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(16, activation="tanh"), tf.keras.layers.Dense(1)]
)
optimizer = tf.keras.optimizers.Adam(1e-3)


def residual():
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x_f)
        tape.watch(t_f)
        out = model(tf.concat([x_f, t_f], axis=1))
        u_x = tape.gradient(out, x_f)
    u_xx = tape.gradient(u_x, x_f)
    u_t = tape.gradient(out, t_f)
    del tape
    return u_t + out * u_x - 0.01 * u_xx


def grad():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(u - model(X_u))) + tf.reduce_mean(tf.square(residual()))
    return loss, tape.gradient(loss, model.trainable_variables)


for it in range(ITERATIONS):
    loss, grads = grad()
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    if it % 5 == 0:
        err = float(np.mean(np.abs(model.predict(X_u, verbose=0) - u.numpy())))
        print(f"it {it} loss {float(loss):.4f} error {err:.4f}")
