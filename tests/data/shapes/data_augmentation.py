"""Shape of TensorFlow's "Data augmentation" tutorial (Keras 3): ``resize_and_rescale`` and
``data_augmentation`` as ``tf.keras.Sequential`` preprocessing models, a ``prepare(ds, shuffle=False,
augment=False)`` helper whose stages depend on its flags (resize and rescale in a map, shuffle, batch,
augmentation in a map, prefetch), a small CNN fitted on the prepared pipelines. The tutorial reads
tf_flowers from TensorFlow Datasets; here synthetic 180x180 images in memory stand in for it."""
import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

IMG_SIZE = 64
batch_size = 32
AUTOTUNE = tf.data.AUTOTUNE
num_classes = 5


def synthetic_flowers(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, size=n)
    images = rng.integers(0, 200, size=(n, 96, 96, 3)).astype("uint8")
    for k in range(num_classes):
        images[labels == k, 10 * k : 10 * k + 20, :, k % 3] = 255
    return tf.data.Dataset.from_tensor_slices((images, labels))


train_ds = synthetic_flowers(3000, 0)
val_ds = synthetic_flowers(600, 1)
test_ds = synthetic_flowers(600, 2)

resize_and_rescale = tf.keras.Sequential([layers.Resizing(IMG_SIZE, IMG_SIZE), layers.Rescaling(1.0 / 255)])

data_augmentation = tf.keras.Sequential(
    [
        layers.RandomFlip("horizontal_and_vertical"),
        layers.RandomRotation(0.2),
    ]
)


def prepare(ds, shuffle=False, augment=False):
    # Resize and rescale all datasets.
    ds = ds.map(lambda x, y: (resize_and_rescale(x), y), num_parallel_calls=AUTOTUNE)

    if shuffle:
        ds = ds.shuffle(1000)

    # Batch all datasets.
    ds = ds.batch(batch_size)

    # Use data augmentation only on the training set.
    if augment:
        ds = ds.map(lambda x, y: (data_augmentation(x, training=True), y), num_parallel_calls=AUTOTUNE)

    # Use buffered prefetching on all datasets.
    return ds.prefetch(buffer_size=AUTOTUNE)


train_ds = prepare(train_ds, shuffle=True, augment=True)
val_ds = prepare(val_ds)
test_ds = prepare(test_ds)

model = tf.keras.Sequential(
    [
        layers.Conv2D(16, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dense(num_classes),
    ]
)

model.compile(
    optimizer="adam",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)

epochs = 5
history = model.fit(train_ds, validation_data=val_ds, epochs=epochs)

loss, acc = model.evaluate(test_ds)
print("Accuracy", acc)
