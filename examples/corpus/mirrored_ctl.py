"""Custom training with ``tf.distribute.MirroredStrategy`` (TensorFlow tutorial shape): the dataset
from ``strategy.distribute_datasets_from_function`` (per-replica batch, sequential map, no
prefetch), a ``train_step`` (the step_fn) run by ``strategy.run`` inside an ``@tf.function``
``distributed_train_step``, the loss scaled by the global batch size.

On a CPU-only machine MirroredStrategy has one replica (the CPU); that is the shape tested here.

    python examples/corpus/mirrored_ctl.py --epochs 1
    tfdoctor profile examples/corpus/mirrored_ctl.py
"""

import argparse
import time

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()

tf.keras.utils.set_random_seed(3)

# Synthetic Fashion-MNIST-shaped data.
rng = np.random.default_rng(3)
train_labels = rng.integers(0, 10, size=12000).astype("int64")
train_images = rng.integers(0, 120, size=(12000, 28, 28), dtype=np.uint8)
for k in range(10):
    r, c = divmod(k, 4)
    train_images[train_labels == k, 2 + r * 8 : 8 + r * 8, 2 + c * 6 : 8 + c * 6] = 230
noisy = rng.random(12000) < 0.1
train_labels[noisy] = rng.integers(0, 10, size=int(noisy.sum()))

strategy = tf.distribute.MirroredStrategy()
print(f"Number of devices: {strategy.num_replicas_in_sync}")

BUFFER_SIZE = len(train_images)
BATCH_SIZE_PER_REPLICA = 64
GLOBAL_BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync


def preprocess(image, label):
    image = tf.cast(image, tf.float32)[..., tf.newaxis] / 255.0
    image = tf.image.random_flip_left_right(image)
    return image, label


def dataset_fn(input_context):
    batch_size = input_context.get_per_replica_batch_size(GLOBAL_BATCH_SIZE)
    dataset = tf.data.Dataset.from_tensor_slices((train_images, train_labels))
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    dataset = dataset.shuffle(BUFFER_SIZE).map(preprocess).batch(batch_size)
    return dataset


train_dist_dataset = strategy.distribute_datasets_from_function(dataset_fn)


def create_model():
    regularizer = tf.keras.regularizers.L2(1e-5)
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=(28, 28, 1)),
            tf.keras.layers.Conv2D(32, 3, activation="relu", kernel_regularizer=regularizer),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, activation="relu", kernel_regularizer=regularizer),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu", kernel_regularizer=regularizer),
            tf.keras.layers.Dense(10, kernel_regularizer=regularizer),
        ]
    )


with strategy.scope():
    # Set reduction to `NONE` so you can do the reduction yourself.
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE
    )

    def compute_loss(labels, predictions, model_losses):
        per_example_loss = loss_object(labels, predictions)
        loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)
        if model_losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))
        return loss

    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
    model = create_model()
    optimizer = tf.keras.optimizers.Adam(learning_rate=1e-3)


def train_step(inputs):
    images, labels = inputs
    with tf.GradientTape() as tape:
        predictions = model(images, training=True)
        loss = compute_loss(labels, predictions, model.losses)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    train_accuracy.update_state(labels, predictions)
    return loss


@tf.function
def distributed_train_step(dataset_inputs):
    per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)


for epoch in range(args.epochs):
    total_loss = 0.0
    num_batches = 0
    start = time.time()
    for x in train_dist_dataset:
        total_loss += distributed_train_step(x)
        num_batches += 1
        if num_batches % 50 == 0:
            print(f"  batch {num_batches}: loss {float(total_loss) / num_batches:.4f}")
    train_loss = total_loss / num_batches
    elapsed = time.time() - start
    print(
        f"Epoch {epoch + 1}, Loss: {float(train_loss):.4f}, "
        f"Accuracy: {train_accuracy.result() * 100:.2f} "
        f"({1000 * elapsed / num_batches:.1f} ms/step)"
    )
    train_accuracy.reset_state()
