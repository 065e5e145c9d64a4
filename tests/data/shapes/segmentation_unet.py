"""Shape of keras-io "Image segmentation with a U-Net-like architecture" (Keras 3; Oxford pets).

As written there: file paths listed with ``os.listdir``, a ``get_dataset()`` helper whose nested
``load_img_masks`` reads, decodes and resizes each image and mask in a parallel map and which returns
``dataset.batch(batch_size)``; ``from tensorflow import data as tf_data`` (and ``image``, ``io``); an
Xception-like U-Net ending in a per-pixel ``Conv2D(num_classes, 3, activation="softmax")``;
``Adam(1e-4)`` positional; ``ModelCheckpoint(save_best_only=True)``; ``fit(verbose=2)``; then
``predict`` on the validation set. Synthetic PNGs (64x64, a bright blob as the "pet", trimap masks
1/2/3) are written beside the script on the first run, for the Oxford pets files.
"""

import os

import numpy as np
import tensorflow as tf

input_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pets", "images")
target_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pets", "trimaps")
img_size = (64, 64)
num_classes = 3
batch_size = 32

if not os.path.exists(input_dir):
    os.makedirs(input_dir)
    os.makedirs(target_dir)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:80, :80]
    for i in range(480):
        cy, cx, r = rng.integers(20, 60), rng.integers(20, 60), rng.integers(8, 18)
        d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
        img = rng.integers(0, 120, (80, 80, 3)).astype("uint8")
        img[d < r] = rng.integers(150, 255, 3).astype("uint8")
        mask = np.full((80, 80, 1), 2, "uint8")
        mask[d < r] = 1
        mask[(d >= r) & (d < r + 2)] = 3
        tf.io.write_file(os.path.join(input_dir, f"pet_{i}.png"), tf.io.encode_png(img))
        tf.io.write_file(os.path.join(target_dir, f"pet_{i}.png"), tf.io.encode_png(mask))

input_img_paths = sorted(
    [os.path.join(input_dir, fname) for fname in os.listdir(input_dir) if fname.endswith(".png")]
)
target_img_paths = sorted(
    [
        os.path.join(target_dir, fname)
        for fname in os.listdir(target_dir)
        if fname.endswith(".png") and not fname.startswith(".")
    ]
)

print("Number of samples:", len(input_img_paths))

import keras
from tensorflow import data as tf_data
from tensorflow import image as tf_image
from tensorflow import io as tf_io


def get_dataset(
    batch_size,
    img_size,
    input_img_paths,
    target_img_paths,
    max_dataset_len=None,
):
    """Returns a TF Dataset."""

    def load_img_masks(input_img_path, target_img_path):
        input_img = tf_io.read_file(input_img_path)
        input_img = tf_io.decode_png(input_img, channels=3)
        input_img = tf_image.resize(input_img, img_size)
        input_img = tf_image.convert_image_dtype(input_img, "float32")

        target_img = tf_io.read_file(target_img_path)
        target_img = tf_io.decode_png(target_img, channels=1)
        target_img = tf_image.resize(target_img, img_size, method="nearest")
        target_img = tf_image.convert_image_dtype(target_img, "uint8")

        # Ground truth labels are 1, 2, 3. Subtract one to make them 0, 1, 2:
        target_img -= 1
        return input_img, target_img

    # For faster debugging, limit the size of data
    if max_dataset_len:
        input_img_paths = input_img_paths[:max_dataset_len]
        target_img_paths = target_img_paths[:max_dataset_len]
    dataset = tf_data.Dataset.from_tensor_slices((input_img_paths, target_img_paths))
    dataset = dataset.map(load_img_masks, num_parallel_calls=tf_data.AUTOTUNE)
    return dataset.batch(batch_size)


from keras import layers


def get_model(img_size, num_classes):
    inputs = keras.Input(shape=img_size + (3,))

    ### [First half of the network: downsampling inputs] ###

    # Entry block
    x = layers.Conv2D(32, 3, strides=2, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)

    previous_block_activation = x  # Set aside residual

    # Blocks 1, 2, 3 are identical apart from the feature depth.
    for filters in [64, 128, 256]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)

        # Project residual
        residual = layers.Conv2D(filters, 1, strides=2, padding="same")(previous_block_activation)
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    ### [Second half of the network: upsampling inputs] ###

    for filters in [256, 128, 64, 32]:
        x = layers.Activation("relu")(x)
        x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.Activation("relu")(x)
        x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)

        x = layers.UpSampling2D(2)(x)

        # Project residual
        residual = layers.UpSampling2D(2)(previous_block_activation)
        residual = layers.Conv2D(filters, 1, padding="same")(residual)
        x = layers.add([x, residual])  # Add back residual
        previous_block_activation = x  # Set aside next residual

    # Add a per-pixel classification layer
    outputs = layers.Conv2D(num_classes, 3, activation="softmax", padding="same")(x)

    # Define the model
    model = keras.Model(inputs, outputs)
    return model


# Build model
model = get_model(img_size, num_classes)
model.summary()

import random

# Split our img paths into a training and a validation set
val_samples = 96
random.Random(1337).shuffle(input_img_paths)
random.Random(1337).shuffle(target_img_paths)
train_input_img_paths = input_img_paths[:-val_samples]
train_target_img_paths = target_img_paths[:-val_samples]
val_input_img_paths = input_img_paths[-val_samples:]
val_target_img_paths = target_img_paths[-val_samples:]

# Instantiate dataset for each split
# Limit input files in `max_dataset_len` for faster epoch training time.
# Remove the `max_dataset_len` arg when running with full dataset.
train_dataset = get_dataset(
    batch_size,
    img_size,
    train_input_img_paths,
    train_target_img_paths,
    max_dataset_len=1000,
)
valid_dataset = get_dataset(batch_size, img_size, val_input_img_paths, val_target_img_paths)

# Configure the model for training.
# We use the "sparse" version of categorical_crossentropy
# because our target data is integers.
model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="sparse_categorical_crossentropy")

callbacks = [keras.callbacks.ModelCheckpoint("oxford_segmentation.keras", save_best_only=True)]

# Train the model, doing validation at the end of every epoch.
epochs = 50
model.fit(
    train_dataset,
    epochs=epochs,
    validation_data=valid_dataset,
    callbacks=callbacks,
    verbose=2,
)

# Generate predictions for all images in the validation set

val_dataset = get_dataset(batch_size, img_size, val_input_img_paths, val_target_img_paths)
val_preds = model.predict(val_dataset)
print(val_preds.shape)
