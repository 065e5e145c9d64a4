"""Shape of keras-io's image classification from scratch (Keras 3 style: tf_data alias)."""
import numpy as np
import keras
from keras import layers
from tensorflow import data as tf_data

image_size = (32, 32)
batch_size = 64
rng = np.random.default_rng(0)
images = rng.integers(0, 255, (2048, 48, 48, 3)).astype("uint8")
labels = rng.integers(0, 2, 2048)
train_ds = tf_data.Dataset.from_tensor_slices((images, labels))

data_augmentation_layers = [layers.RandomFlip("horizontal"), layers.RandomRotation(0.1)]


def data_augmentation(images):
    for layer in data_augmentation_layers:
        images = layer(images)
    return images


def resize(img, label):
    img = keras.ops.image.resize(keras.ops.cast(img, "float32"), image_size)
    return img, label


train_ds = train_ds.map(resize)
train_ds = train_ds.batch(batch_size)
train_ds = train_ds.map(lambda img, label: (data_augmentation(img), label), num_parallel_calls=tf_data.AUTOTUNE)
train_ds = train_ds.prefetch(tf_data.AUTOTUNE)


def make_model(input_shape, num_classes):
    inputs = keras.Input(shape=input_shape)
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(32, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    previous_block_activation = x
    for size in [64, 128]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(previous_block_activation)
        x = layers.add([x, residual])
        previous_block_activation = x
    x = layers.GlobalAveragePooling2D()(x)
    units = 1 if num_classes == 2 else num_classes
    x = layers.Dropout(0.25)(x)
    outputs = layers.Dense(units, activation=None)(x)
    return keras.Model(inputs, outputs)


model = make_model(input_shape=image_size + (3,), num_classes=2)
epochs = 2
callbacks = [keras.callbacks.ModelCheckpoint("save_at_{epoch}.keras")]
model.compile(
    optimizer=keras.optimizers.Adam(3e-4),
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.BinaryAccuracy(name="acc")],
)
model.fit(train_ds, epochs=epochs, callbacks=callbacks)
