"""Expert twin of walkthrough.py: the same model, batch size 32, SGD(0.01), float32. The whole step is
one ``tf.function``: forward, gradients, the update and both metrics (the accuracy on a second
training-mode forward pass, as the tutorial computes it); the pipeline's map runs in parallel and
the batches are prefetched.

    python examples/corpus/walkthrough_expert.py --epochs 1
"""

import argparse

import keras
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

keras.utils.set_random_seed(0)

rng = np.random.default_rng(0)
N, F = 8192, 64
features = rng.normal(size=(N, F)).astype("float32")
labels = (features[:, :3].sum(axis=1) > 0).astype("int64") + (features[:, 3] > 1).astype("int64")


def pack_features_vector(features, labels):
    features = tf.stack(tf.unstack(features, axis=-1), axis=1)
    return features, labels


batch_size = 32
train_dataset = (
    tf.data.Dataset.from_tensor_slices((features, labels))
    .shuffle(N)
    .batch(batch_size)
    .map(pack_features_vector, num_parallel_calls=tf.data.AUTOTUNE)
    .prefetch(tf.data.AUTOTUNE)
)

model = keras.Sequential(
    [
        keras.layers.Input(shape=(F,)),
        keras.layers.Dense(256, activation=tf.nn.relu),
        keras.layers.Dense(256, activation=tf.nn.relu),
        keras.layers.Dense(3),
    ]
)
loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.SGD(learning_rate=0.01)
epoch_loss_avg = keras.metrics.Mean()
epoch_accuracy = keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss_value = loss_object(y, model(x, training=True))
    grads = tape.gradient(loss_value, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    epoch_loss_avg.update_state(loss_value)
    epoch_accuracy.update_state(y, model(x, training=True))


for epoch in range(args.epochs):
    epoch_loss_avg.reset_state()
    epoch_accuracy.reset_state()
    for x, y in train_dataset:
        train_step(x, y)
    print(
        "Epoch {:03d}: Loss: {:.3f}, Accuracy: {:.3%}".format(
            epoch, epoch_loss_avg.result(), epoch_accuracy.result()
        )
    )
