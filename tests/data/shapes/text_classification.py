"""Shape of TensorFlow's "Basic text classification" tutorial (IMDB; synthetic reviews written on first run)."""
import os
import re
import shutil
import string

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers, losses

dataset_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aclImdb")
if not os.path.exists(dataset_dir):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    good, bad = ["great", "wonderful", "loved"], ["awful", "boring", "hated"]
    for split in ("train", "test"):
        for label in ("neg", "pos"):
            os.makedirs(os.path.join(dataset_dir, split, label))
            for i in range(1200):
                body = list(rng.choice(words, 120))
                for _ in range(3):
                    body.insert(int(rng.integers(0, len(body))), str(rng.choice(good if label == "pos" else bad)))
                with open(os.path.join(dataset_dir, split, label, f"{i}.txt"), "w") as f:
                    f.write("<br />".join(" ".join(body[k : k + 40]) for k in range(0, 120, 40)))

train_dir = os.path.join(dataset_dir, "train")
remove_dir = os.path.join(train_dir, "unsup")
shutil.rmtree(remove_dir, ignore_errors=True)

batch_size = 32
seed = 42

raw_train_ds = tf.keras.utils.text_dataset_from_directory(
    "aclImdb/train", batch_size=batch_size, validation_split=0.2, subset="training", seed=seed
)
raw_val_ds = tf.keras.utils.text_dataset_from_directory(
    "aclImdb/train", batch_size=batch_size, validation_split=0.2, subset="validation", seed=seed
)
raw_test_ds = tf.keras.utils.text_dataset_from_directory("aclImdb/test", batch_size=batch_size)


def custom_standardization(input_data):
    lowercase = tf.strings.lower(input_data)
    stripped_html = tf.strings.regex_replace(lowercase, "<br />", " ")
    return tf.strings.regex_replace(stripped_html, "[%s]" % re.escape(string.punctuation), "")


max_features = 10000
sequence_length = 250

vectorize_layer = layers.TextVectorization(
    standardize=custom_standardization,
    max_tokens=max_features,
    output_mode="int",
    output_sequence_length=sequence_length,
)

train_text = raw_train_ds.map(lambda x, y: x)
vectorize_layer.adapt(train_text)


def vectorize_text(text, label):
    text = tf.expand_dims(text, -1)
    return vectorize_layer(text), label


text_batch, label_batch = next(iter(raw_train_ds))
first_review, first_label = text_batch[0], label_batch[0]
print("Review", first_review)
print("Label", raw_train_ds.class_names[first_label])
print("Vectorized review", vectorize_text(first_review, first_label))

train_ds = raw_train_ds.map(vectorize_text)
val_ds = raw_val_ds.map(vectorize_text)
test_ds = raw_test_ds.map(vectorize_text)

AUTOTUNE = tf.data.AUTOTUNE

train_ds = train_ds.cache().prefetch(buffer_size=AUTOTUNE)
val_ds = val_ds.cache().prefetch(buffer_size=AUTOTUNE)
test_ds = test_ds.cache().prefetch(buffer_size=AUTOTUNE)

embedding_dim = 16

model = tf.keras.Sequential(
    [
        layers.Embedding(max_features, embedding_dim),
        layers.Dropout(0.2),
        layers.GlobalAveragePooling1D(),
        layers.Dropout(0.2),
        layers.Dense(1, activation="sigmoid"),
    ]
)

model.summary()

model.compile(
    loss=losses.BinaryCrossentropy(),
    optimizer="adam",
    metrics=[tf.metrics.BinaryAccuracy(threshold=0.5)],
)

epochs = 10
history = model.fit(train_ds, validation_data=val_ds, epochs=epochs)

loss, accuracy = model.evaluate(test_ds)

print("Loss: ", loss)
print("Accuracy: ", accuracy)

export_model = tf.keras.Sequential([vectorize_layer, model, layers.Activation("sigmoid")])

export_model.compile(loss=losses.BinaryCrossentropy(from_logits=False), optimizer="adam", metrics=["accuracy"])

metrics = export_model.evaluate(raw_test_ds, return_dict=True)
print(metrics)
