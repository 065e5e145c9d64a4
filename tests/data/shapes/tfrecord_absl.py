"""Train a CIFAR-sized classifier from TFRecord shards, driven by absl flags.

Shape of the scripts in tensorflow/models, TPU and research repositories: ``absl.flags`` for every
option (``FLAGS.batch_size``, ``FLAGS.learning_rate``), ``app.run(main)``, the data kept as TFRecord
shards of PNG-encoded images, an ``input_fn(is_training, ...)`` that lists the shards, interleaves
``TFRecordDataset`` readers, shuffles the serialized records, then parses and decodes each one with
``tf.io.parse_single_example`` + ``tf.io.decode_png`` in a sequential ``map``, random flips for
training, ``batch(drop_remainder=True)``, no prefetch. The shards are synthetic, written first.
"""

import os

import numpy as np
import tensorflow as tf
from absl import app, flags, logging

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", "tfrecords", "Directory of the train-*/eval-* shards.")
flags.DEFINE_integer("batch_size", 64, "Global batch size.")
flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate.")
flags.DEFINE_integer("train_epochs", 5, "Epochs to train.")
flags.DEFINE_integer("num_shards", 4, "Shards per split.")

IMAGE_SIZE = 32
NUM_CLASSES = 10


def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64_feature(value):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def write_shards(split, n):
    """Stand-in for the dataset conversion script: PNG-encoded images with their labels."""
    rng = np.random.default_rng(0 if split == "train" else 1)
    os.makedirs(FLAGS.data_dir, exist_ok=True)
    per_shard = n // FLAGS.num_shards
    for s in range(FLAGS.num_shards):
        path = os.path.join(FLAGS.data_dir, f"{split}-{s:05d}-of-{FLAGS.num_shards:05d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for _ in range(per_shard):
                label = int(rng.integers(NUM_CLASSES))
                image = rng.integers(0, 160, size=(IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
                row, col = divmod(label, 4)
                image[row * 8 : row * 8 + 8, col * 8 : col * 8 + 8, label % 3] = 255
                example = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "image/encoded": _bytes_feature(tf.io.encode_png(image).numpy()),
                            "image/class/label": _int64_feature(label),
                        }
                    )
                )
                writer.write(example.SerializeToString())


def parse_record(serialized, is_training):
    features = tf.io.parse_single_example(
        serialized,
        {
            "image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        },
    )
    image = tf.io.decode_png(features["image/encoded"], channels=3)
    image = tf.image.convert_image_dtype(image, tf.float32)
    image = tf.reshape(image, [IMAGE_SIZE, IMAGE_SIZE, 3])
    if is_training:
        image = tf.image.random_flip_left_right(image)
    label = tf.cast(features["image/class/label"], tf.int32)
    return image, label


def input_fn(is_training, data_dir, batch_size):
    pattern = os.path.join(data_dir, ("train" if is_training else "eval") + "-*.tfrecord")
    dataset = tf.data.Dataset.list_files(pattern, shuffle=is_training)
    dataset = dataset.interleave(tf.data.TFRecordDataset, cycle_length=FLAGS.num_shards)
    if is_training:
        dataset = dataset.shuffle(buffer_size=10000)
    dataset = dataset.map(lambda x: parse_record(x, is_training))
    dataset = dataset.batch(batch_size, drop_remainder=True)
    return dataset


def build_model():
    return tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 3)),
            tf.keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dense(NUM_CLASSES),
        ]
    )


def main(argv):
    del argv  # Unused.
    tf.keras.utils.set_random_seed(0)
    if not tf.io.gfile.glob(os.path.join(FLAGS.data_dir, "train-*")):
        logging.info("Writing synthetic shards to %s", FLAGS.data_dir)
        write_shards("train", 8192)
        write_shards("eval", 1024)

    train_ds = input_fn(True, FLAGS.data_dir, FLAGS.batch_size)
    eval_ds = input_fn(False, FLAGS.data_dir, FLAGS.batch_size)

    model = build_model()
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=FLAGS.learning_rate),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(train_ds, epochs=FLAGS.train_epochs, validation_data=eval_ds)
    logging.info("Eval: %s", model.evaluate(eval_ds, return_dict=True, verbose=0))


if __name__ == "__main__":
    app.run(main)
