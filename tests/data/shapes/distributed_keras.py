"""
Shape of TensorFlow's "Distributed training with Keras" tutorial (tutorials/distribute/keras), as it is
written: a `MirroredStrategy`, `BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync`,
`mnist_train.map(scale).cache().shuffle(BUFFER_SIZE).batch(BATCH_SIZE)`, the model built and compiled
under `strategy.scope()`, a `decay(epoch)` function fed to `LearningRateScheduler`, a callback printing
the learning rate, `ModelCheckpoint` and `TensorBoard` callbacks. tensorflow_datasets is not installed
here: synthetic MNIST-like arrays stand in for `tfds.load("mnist")`; a smaller dense network keeps a
step CPU-sized.
"""

import os

import numpy as np
import tensorflow as tf

print(tf.__version__)

# Load the MNIST dataset (synthetic here: 28x28 uint8 digits with a class-specific stroke)
rng = np.random.default_rng(0)
labels = rng.integers(0, 10, size=24000).astype("int64")
images = rng.integers(0, 80, size=(24000, 28, 28, 1), dtype=np.uint8)
for k in range(10):
    images[labels == k, 2 + 2 * k : 6 + 2 * k, 4:24, 0] += 40
noisy = rng.random(24000) < 0.2  # some digits mislabelled, as real data has
labels[noisy] = rng.integers(0, 10, size=int(noisy.sum()))
mnist_train = tf.data.Dataset.from_tensor_slices((images[:20000], labels[:20000]))
mnist_test = tf.data.Dataset.from_tensor_slices((images[20000:], labels[20000:]))

# Define the distribution strategy
strategy = tf.distribute.MirroredStrategy()
print("Number of devices: {}".format(strategy.num_replicas_in_sync))

# Set up the input pipeline
num_train_examples = 20000
num_test_examples = 4000

BUFFER_SIZE = 10000

BATCH_SIZE_PER_REPLICA = 64
BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync


def scale(image, label):
    image = tf.cast(image, tf.float32)
    image /= 255

    return image, label


train_dataset = mnist_train.map(scale).cache().shuffle(BUFFER_SIZE).batch(BATCH_SIZE)
eval_dataset = mnist_test.map(scale).batch(BATCH_SIZE)

# Create the model
with strategy.scope():
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Conv2D(16, 3, activation="relu", input_shape=(28, 28, 1)),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )

    model.compile(
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=tf.keras.optimizers.Adam(),
        metrics=["accuracy"],
    )

# Define the callbacks
# Define the checkpoint directory to store the checkpoints.
checkpoint_dir = "./training_checkpoints"
# Define the name of the checkpoint files.
checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt_{epoch}.weights.h5")


# Define a function for decaying the learning rate.
# You can define any decay function you need.
def decay(epoch):
    if epoch < 3:
        return 1e-3
    elif epoch >= 3 and epoch < 7:
        return 1e-4
    else:
        return 1e-5


# Define a callback for printing the learning rate at the end of each epoch.
class PrintLR(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        print("\nLearning rate for epoch {} is {}".format(epoch + 1, model.optimizer.learning_rate.numpy()))


# Put all the callbacks together.
callbacks = [
    tf.keras.callbacks.TensorBoard(log_dir="./logs"),
    tf.keras.callbacks.ModelCheckpoint(filepath=checkpoint_prefix, save_weights_only=True),
    tf.keras.callbacks.LearningRateScheduler(decay),
    PrintLR(),
]

# Train and evaluate
EPOCHS = 12

model.fit(train_dataset, epochs=EPOCHS, callbacks=callbacks)

model.load_weights(os.path.join(checkpoint_dir, "ckpt_{}.weights.h5".format(EPOCHS)))

eval_loss, eval_acc = model.evaluate(eval_dataset)

print("Eval loss: {}, Eval accuracy: {}".format(eval_loss, eval_acc))
