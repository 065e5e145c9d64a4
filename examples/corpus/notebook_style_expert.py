# %% [markdown]
"""
# Structured data classification from scratch (expert twin)

Expert twin of notebook_style.py: the same cells, model, batch size 64, Adam(3e-4), float32;
the step is a `@tf.function` updating the epoch's loss metric (created once, reset each epoch),
and the pipeline is cached and prefetched.

    python examples/corpus/notebook_style_expert.py --epochs 1
"""

# %%
import argparse

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=40)
args, _ = parser.parse_known_args()

# %% [markdown]
"""
## Prepare the data

A synthetic "heart disease"-like table: 12 numeric features and 2 categorical ones, a binary
target that depends on a few of them.
"""

# %%
rng = np.random.default_rng(1234)
num_rows = 12288
numeric = rng.normal(size=(num_rows, 12)).astype("float32")
category_a = rng.integers(0, 4, size=num_rows)
category_b = rng.integers(0, 3, size=num_rows)
logit = 1.5 * numeric[:, 0] - numeric[:, 3] + 0.8 * numeric[:, 5] * numeric[:, 7]
logit += np.array([-1.0, 0.0, 0.5, 1.0])[category_a] + 0.3 * category_b
target = (logit + rng.normal(0.0, 1.0, size=num_rows) > 0).astype("float32")

features = np.concatenate(
    [numeric, np.eye(4, dtype="float32")[category_a], np.eye(3, dtype="float32")[category_b]],
    axis=1,
)
split = int(0.8 * num_rows)
x_train, y_train = features[:split], target[:split]
x_val, y_val = features[split:], target[split:]
print(f"Using {len(x_train)} samples for training and {len(x_val)} for validation")

# %% [markdown]
"""
## Visualise the target balance
"""

# %%
try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the notebook had it; a bare environment may not
    plt = None
try:
    from IPython.display import display
except ImportError:
    display = print

display(f"positive rate: {y_train.mean():.3f}")
if plt is not None:
    plt.hist(logit, bins=50)
    plt.close()

# %% [markdown]
"""
## Build a model

A small residual MLP over the concatenated features.
"""

# %%
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

keras.utils.set_random_seed(1234)

inputs = keras.Input(shape=(features.shape[1],))
x = keras.layers.Dense(128, activation="relu")(inputs)
for _ in range(2):
    h = keras.layers.Dense(128, activation="relu")(x)
    h = keras.layers.Dropout(0.1)(h)
    x = keras.layers.LayerNormalization()(x + h)
outputs = keras.layers.Dense(1)(x)
model = keras.Model(inputs, outputs)
model.summary()

# %% [markdown]
"""
## Train the model

A plain GradientTape loop, as in the notebook.
"""

# %%
import time  # noqa: E402

batch_size = 64
optimizer = keras.optimizers.Adam(learning_rate=3e-4)
loss_fn = keras.losses.BinaryCrossentropy(from_logits=True)
train_ds = (
    tf.data.Dataset.from_tensor_slices((x_train, y_train))
    .cache()
    .shuffle(4096)
    .batch(batch_size)
    .prefetch(tf.data.AUTOTUNE)
)


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        logits = model(xb, training=True)
        loss = loss_fn(yb[:, None], logits)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    epoch_loss.update_state(loss)
    return loss


history = []
epoch_loss = keras.metrics.Mean()
for epoch in range(args.epochs):
    epoch_loss.reset_state()
    t0 = time.time()
    for step, (xb, yb) in enumerate(train_ds):
        train_step(xb, yb)
    dt = time.time() - t0
    val_logits = model(x_val, training=False)
    val_acc = float(tf.reduce_mean(tf.cast((val_logits[:, 0] > 0) == (y_val > 0.5), tf.float32)))
    history.append(float(epoch_loss.result()))
    print(
        f"epoch {epoch}: loss={history[-1]:.4f} val_acc={val_acc:.3f} ({1000 * dt / (step + 1):.1f} ms/step)"
    )

# %% [markdown]
"""
## Plot the learning curve
"""

# %%
if plt is not None:
    plt.plot(history)
    plt.close()
