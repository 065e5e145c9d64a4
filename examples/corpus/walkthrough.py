"""Custom training: walkthrough (the TensorFlow tutorial's shape): a ``loss()`` function, a ``grad()``
function holding the GradientTape and returning the loss and the gradients, and the training loop
applying them with ``optimizer.apply_gradients``, the epoch's metrics updated in the loop (a second
forward pass for the accuracy, as the tutorial writes it). Before training it prints the first
shuffled batch and the untrained loss, as the tutorial does.

    python examples/corpus/walkthrough.py --epochs 1
    tfdoctor profile examples/corpus/walkthrough.py
"""

import argparse

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

keras.utils.set_random_seed(0)

# Synthetic tabular data (the tutorial reads the Iris CSV): 64 features, 3 classes.
rng = np.random.default_rng(0)
N, F = 8192, 64
features = rng.normal(size=(N, F)).astype("float32")
labels = (features[:, :3].sum(axis=1) > 0).astype("int64") + (features[:, 3] > 1).astype("int64")


def pack_features_vector(features, labels):
    """Pack the features into a single array."""
    features = tf.stack(tf.unstack(features, axis=-1), axis=1)
    return features, labels


batch_size = 32
train_dataset = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(N).batch(batch_size)
train_dataset = train_dataset.map(pack_features_vector)

features_b, labels_b = next(iter(train_dataset))
print(features_b[:5])

model = keras.Sequential(
    [
        keras.layers.Input(shape=(F,)),
        keras.layers.Dense(256, activation=tf.nn.relu),
        keras.layers.Dense(256, activation=tf.nn.relu),
        keras.layers.Dense(3),
    ]
)

loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def loss(model, x, y, training):
    # training=training is needed only if there are layers with different
    # behavior during training versus inference (e.g. Dropout).
    y_ = model(x, training=training)
    return loss_object(y_true=y, y_pred=y_)


l = loss(model, features_b, labels_b, training=False)  # noqa: E741 (the tutorial's name)
print("Loss test: {}".format(l))


def grad(model, inputs, targets):
    with tf.GradientTape() as tape:
        loss_value = loss(model, inputs, targets, training=True)
    return loss_value, tape.gradient(loss_value, model.trainable_variables)


optimizer = keras.optimizers.SGD(learning_rate=0.01)

train_loss_results = []
train_accuracy_results = []

for epoch in range(args.epochs):
    epoch_loss_avg = keras.metrics.Mean()
    epoch_accuracy = keras.metrics.SparseCategoricalAccuracy()

    # Training loop - using batches of 32
    for x, y in train_dataset:
        # Optimize the model
        loss_value, grads = grad(model, x, y)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

        # Track progress
        epoch_loss_avg.update_state(loss_value)  # Add current batch loss
        # Compare predicted label to actual label
        # training=True is needed only if there are layers with different
        # behavior during training versus inference (e.g. Dropout).
        epoch_accuracy.update_state(y, model(x, training=True))

    # End epoch
    train_loss_results.append(epoch_loss_avg.result())
    train_accuracy_results.append(epoch_accuracy.result())

    print(
        "Epoch {:03d}: Loss: {:.3f}, Accuracy: {:.3%}".format(
            epoch, epoch_loss_avg.result(), epoch_accuracy.result()
        )
    )
