"""Shape of TensorFlow's "Load CSV data" tutorial (the Titanic part): a dict of numpy columns, a symbolic
preprocessing head (Normalization of the numeric columns, StringLookup + CategoryEncoding of the strings,
concatenated), a `titanic_model(preprocessing_head, inputs)` builder compiling a functional model whose
output comes from a Sequential `body`, `fit(x=titanic_features_dict, y=titanic_labels, epochs=10)`."""
import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

rng = np.random.default_rng(0)
n = 800
titanic_features = {
    "sex": rng.choice(["male", "female"], n),
    "age": rng.uniform(1, 80, n).astype("float32"),
    "n_siblings_spouses": rng.integers(0, 5, n).astype("float32"),
    "parch": rng.integers(0, 4, n).astype("float32"),
    "fare": rng.uniform(5, 200, n).astype("float32"),
    "class": rng.choice(["First", "Second", "Third"], n),
    "deck": rng.choice(["A", "B", "C", "unknown"], n),
    "embark_town": rng.choice(["Southampton", "Cherbourg", "Queenstown"], n),
    "alone": rng.choice(["y", "n"], n),
}
titanic_labels = ((titanic_features["sex"] == "female") | (titanic_features["age"] < 10)).astype("float32")

inputs = {}
for name, column in titanic_features.items():
    dtype = tf.string if column.dtype.kind in "OU" else tf.float32
    inputs[name] = tf.keras.Input(shape=(1,), name=name, dtype=dtype)

numeric_inputs = {name: input for name, input in inputs.items() if input.dtype == tf.float32}
x = layers.Concatenate()(list(numeric_inputs.values()))
norm = layers.Normalization()
norm.adapt(np.stack([titanic_features[k] for k in numeric_inputs], axis=1))
all_numeric_inputs = norm(x)
preprocessed_inputs = [all_numeric_inputs]

for name, input in inputs.items():
    if input.dtype == tf.float32:
        continue
    lookup = layers.StringLookup(vocabulary=np.unique(titanic_features[name]))
    one_hot = layers.CategoryEncoding(num_tokens=lookup.vocabulary_size())
    x = lookup(input)
    x = one_hot(x)
    preprocessed_inputs.append(x)

preprocessed_inputs_cat = layers.Concatenate()(preprocessed_inputs)
titanic_preprocessing = tf.keras.Model(inputs, preprocessed_inputs_cat)

titanic_features_dict = {name: tf.constant(np.asarray(value)[:, None]) for name, value in titanic_features.items()}


def titanic_model(preprocessing_head, inputs):
    body = tf.keras.Sequential([layers.Dense(64, activation="relu"), layers.Dense(1)])

    preprocessed_inputs = preprocessing_head(inputs)
    result = body(preprocessed_inputs)
    model = tf.keras.Model(inputs, result)

    model.compile(loss=tf.keras.losses.BinaryCrossentropy(from_logits=True), optimizer=tf.keras.optimizers.Adam())
    return model


titanic_model = titanic_model(titanic_preprocessing, inputs)
titanic_model.fit(x=titanic_features_dict, y=titanic_labels, epochs=10)
