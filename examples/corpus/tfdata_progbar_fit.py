"""A blog-post style classifier (pyimagesearch shape): module constants ``INIT_LR = 1e-3``, ``BS``,
``EPOCHS``; a tf.data pipeline with two sequential ``.map`` calls (load, augment) and no prefetch;
a model ending in ``Dense(NUM_CLASSES)`` followed by ``Activation("softmax")``; ``fit`` with the
default progress bar (verbose=1).

    python examples/corpus/tfdata_progbar_fit.py --epochs 1
    tfdoctor profile examples/corpus/tfdata_progbar_fit.py
"""

# import the necessary packages
import argparse

import numpy as np
import tensorflow as tf
from tensorflow.keras.layers import (
    Activation,
    BatchNormalization,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    MaxPooling2D,
)
from tensorflow.keras.models import Sequential
from tensorflow.keras.optimizers import Adam

# initialize the initial learning rate, batch size, and number of epochs to train for
INIT_LR = 1e-3
BS = 32
EPOCHS = 25
NUM_CLASSES = 5
IMAGE_SIZE = 48

ap = argparse.ArgumentParser()
ap.add_argument("-e", "--epochs", type=int, default=EPOCHS, help="number of epochs")
args = vars(ap.parse_args())

tf.keras.utils.set_random_seed(42)


def make_images(n, seed=42):
    """Synthetic 'photos' as JPEG bytes (what reading files from disk gives): uint8 noise with a
    class-coloured square somewhere in the image."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, size=n).astype("int32")
    images = rng.integers(0, 200, size=(n, 64, 64, 3), dtype=np.uint8)
    for i in range(n):
        r, c = rng.integers(0, 48, size=2)
        images[i, r : r + 16, c : c + 16, labels[i] % 3] = 255 - 20 * labels[i]
    encoded = np.array([tf.io.encode_jpeg(img, quality=90).numpy() for img in images])
    return encoded, labels


def load_images(image, label):
    # decode, convert to float in [0, 1] and resize to the network's input size
    image = tf.io.decode_jpeg(image, channels=3)
    image = tf.image.convert_image_dtype(image, dtype=tf.float32)
    image = tf.image.resize(image, (IMAGE_SIZE, IMAGE_SIZE))
    return (image, label)


def augment(image, label):
    # perform random horizontal flips, brightness and contrast changes
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 0.1)
    image = tf.image.random_contrast(image, 0.8, 1.2)
    return (image, label)


print("[INFO] loading images...")
(trainX, trainY) = make_images(4000)
(testX, testY) = make_images(1000, seed=7)

# build the training and testing data pipelines
trainDS = tf.data.Dataset.from_tensor_slices((trainX, trainY))
trainDS = trainDS.shuffle(BS * 100).map(load_images).map(augment).batch(BS)
testDS = tf.data.Dataset.from_tensor_slices((testX, testY))
testDS = testDS.map(load_images).batch(BS)

# initialize our model
print("[INFO] compiling model...")
model = Sequential()
model.add(tf.keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 3)))
model.add(Conv2D(16, (3, 3), padding="same"))
model.add(Activation("relu"))
model.add(BatchNormalization())
model.add(MaxPooling2D(pool_size=(2, 2)))
model.add(Conv2D(32, (3, 3), padding="same"))
model.add(Activation("relu"))
model.add(BatchNormalization())
model.add(MaxPooling2D(pool_size=(2, 2)))
model.add(Conv2D(64, (3, 3), padding="same"))
model.add(Activation("relu"))
model.add(BatchNormalization())
model.add(MaxPooling2D(pool_size=(2, 2)))
model.add(Flatten())
model.add(Dense(64))
model.add(Activation("relu"))
model.add(Dropout(0.3))
model.add(Dense(NUM_CLASSES))
model.add(Activation("softmax"))

opt = Adam(learning_rate=INIT_LR)
model.compile(loss="sparse_categorical_crossentropy", optimizer=opt, metrics=["accuracy"])

# train the network
print("[INFO] training network for {} epochs...".format(args["epochs"]))
H = model.fit(trainDS, validation_data=testDS, epochs=args["epochs"])

# evaluate the network
print("[INFO] evaluating network...")
(loss, acc) = model.evaluate(testDS, verbose=0)
print("[INFO] test accuracy: {:.4f}".format(acc))
