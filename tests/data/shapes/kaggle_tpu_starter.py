"""The shape of Kaggle's "Flower classification with TPUs" starter notebooks, the template countless
competition notebooks copy: TPU detection falling back to the default strategy, ``AUTO =
tf.data.experimental.AUTOTUNE``, ``BATCH_SIZE = 16 * strategy.num_replicas_in_sync``, ``get_*_dataset()``
functions returning pipelines with ``repeat()``, a ramp-up/decay ``lrfn(epoch)`` through
``LearningRateScheduler`` whose peak scales with the replicas, the model built ``with strategy.scope():``
and ``fit(..., steps_per_epoch=STEPS_PER_EPOCH)``. Synthetic images in memory instead of TFRecords, a
small convnet instead of a pretrained one.

    python kaggle_tpu_starter.py
"""

import numpy as np
import tensorflow as tf

# Detect hardware, return appropriate distribution strategy
try:
    tpu = tf.distribute.cluster_resolver.TPUClusterResolver()  # TPU detection
    print("Running on TPU ", tpu.master())
except ValueError:
    tpu = None

if tpu:
    tf.config.experimental_connect_to_cluster(tpu)
    tf.tpu.experimental.initialize_tpu_system(tpu)
    strategy = tf.distribute.TPUStrategy(tpu)
else:
    strategy = tf.distribute.get_strategy()  # default strategy: CPU and single GPU

print("REPLICAS: ", strategy.num_replicas_in_sync)

AUTO = tf.data.experimental.AUTOTUNE
IMAGE_SIZE = [48, 48]
EPOCHS = 3
BATCH_SIZE = 16 * strategy.num_replicas_in_sync
CLASSES = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
NUM_TRAINING_IMAGES = 2048
NUM_VALIDATION_IMAGES = 256
STEPS_PER_EPOCH = NUM_TRAINING_IMAGES // BATCH_SIZE

rng = np.random.default_rng(0)
train_images = rng.integers(0, 256, size=(NUM_TRAINING_IMAGES, 56, 56, 3), dtype=np.uint8)
train_labels = rng.integers(0, len(CLASSES), size=NUM_TRAINING_IMAGES).astype(np.int32)
val_images = rng.integers(0, 256, size=(NUM_VALIDATION_IMAGES, 56, 56, 3), dtype=np.uint8)
val_labels = rng.integers(0, len(CLASSES), size=NUM_VALIDATION_IMAGES).astype(np.int32)
for images, labels in ((train_images, train_labels), (val_images, val_labels)):
    for c in range(len(CLASSES)):  # a class-specific bright patch: something to learn
        images[labels == c, 8 * c : 8 * c + 12, 8:20, c % 3] = 255


def decode_image(image):
    image = tf.cast(image, tf.float32) / 255.0  # convert image to floats in [0, 1] range
    image = tf.image.resize(image, IMAGE_SIZE)  # explicit size needed for TPU
    return image


def read_labeled_example(image, label):
    return decode_image(image), label


def data_augment(image, label):
    # data augmentation on the TPU-friendly side: random flips and brightness
    image = tf.image.random_flip_left_right(image)
    image = tf.image.random_brightness(image, 0.1)
    return image, label


def get_training_dataset():
    dataset = tf.data.Dataset.from_tensor_slices((train_images, train_labels))
    dataset = dataset.map(read_labeled_example)
    dataset = dataset.map(data_augment, num_parallel_calls=AUTO)
    dataset = dataset.repeat()  # the training dataset must repeat for several epochs
    dataset = dataset.shuffle(2048)
    dataset = dataset.batch(BATCH_SIZE)
    dataset = dataset.prefetch(AUTO)  # prefetch next batch while training (autotune prefetch buffer size)
    return dataset


def get_validation_dataset():
    dataset = tf.data.Dataset.from_tensor_slices((val_images, val_labels))
    dataset = dataset.map(read_labeled_example, num_parallel_calls=AUTO)
    dataset = dataset.batch(BATCH_SIZE)
    dataset = dataset.cache()
    dataset = dataset.prefetch(AUTO)
    return dataset


LR_START = 0.00001
LR_MAX = 0.00005 * strategy.num_replicas_in_sync
LR_MIN = 0.00001
LR_RAMPUP_EPOCHS = 1
LR_SUSTAIN_EPOCHS = 0
LR_EXP_DECAY = 0.8


def lrfn(epoch):
    if epoch < LR_RAMPUP_EPOCHS:
        lr = (LR_MAX - LR_START) / LR_RAMPUP_EPOCHS * epoch + LR_START
    elif epoch < LR_RAMPUP_EPOCHS + LR_SUSTAIN_EPOCHS:
        lr = LR_MAX
    else:
        lr = (LR_MAX - LR_MIN) * LR_EXP_DECAY ** (epoch - LR_RAMPUP_EPOCHS - LR_SUSTAIN_EPOCHS) + LR_MIN
    return lr


lr_callback = tf.keras.callbacks.LearningRateScheduler(lrfn, verbose=True)

with strategy.scope():
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=[*IMAGE_SIZE, 3]),
            tf.keras.layers.Conv2D(32, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, activation="relu"),
            tf.keras.layers.GlobalAveragePooling2D(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(len(CLASSES), activation="softmax"),
        ]
    )

model.compile(
    optimizer="adam",
    loss="sparse_categorical_crossentropy",
    metrics=["sparse_categorical_accuracy"],
)
model.summary()

history = model.fit(
    get_training_dataset(),
    steps_per_epoch=STEPS_PER_EPOCH,
    epochs=EPOCHS,
    validation_data=get_validation_dataset(),
    callbacks=[lr_callback],
)
