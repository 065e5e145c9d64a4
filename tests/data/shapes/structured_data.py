"""Classify structured data using Keras preprocessing layers: the shape of TensorFlow's tutorial (a
``df_to_dataset(dataframe, shuffle=True, batch_size=32)`` helper called with a module-level
``batch_size = 256``, ``prefetch(batch_size)``, Normalization / StringLookup / IntegerLookup layers
adapted on the training set and built into a functional model of many named inputs, ``optimizer="adam"``).
The tutorial reads PetFinder's CSV with pandas; here the columns are numpy arrays in a dict, as
``{key: value.to_numpy()[:, tf.newaxis] for key, value in dataframe.items()}`` makes them."""

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

rng = np.random.default_rng(0)
n = 11537
dataframe = {
    "Type": rng.choice(["Cat", "Dog"], n),
    "Age": rng.integers(0, 60, n),
    "Breed1": rng.choice([f"Breed{i}" for i in range(40)], n),
    "Gender": rng.choice(["Male", "Female", "Mixed"], n),
    "Color1": rng.choice(["Black", "Brown", "Golden", "Cream", "Gray", "White"], n),
    "Color2": rng.choice(["Black", "Brown", "Golden", "Cream", "Gray", "White", "No Color"], n),
    "MaturitySize": rng.choice(["Small", "Medium", "Large"], n),
    "FurLength": rng.choice(["Short", "Medium", "Long"], n),
    "Vaccinated": rng.choice(["Yes", "No", "Not Sure"], n),
    "Sterilized": rng.choice(["Yes", "No", "Not Sure"], n),
    "Health": rng.choice(["Healthy", "Minor Injury", "Serious Injury"], n),
    "Fee": rng.integers(0, 300, n).astype("float32"),
    "PhotoAmt": rng.integers(0, 20, n).astype("float32"),
}
dataframe["target"] = ((dataframe["Type"] == "Dog") ^ (dataframe["PhotoAmt"] > 4)).astype("int64")

order = rng.permutation(n)
cut1, cut2 = int(0.8 * n), int(0.9 * n)
train = {k: v[order[:cut1]] for k, v in dataframe.items()}
val = {k: v[order[cut1:cut2]] for k, v in dataframe.items()}
test = {k: v[order[cut2:]] for k, v in dataframe.items()}

print(len(order[:cut1]), "training examples")


def df_to_dataset(dataframe, shuffle=True, batch_size=32):
    df = dict(dataframe)
    labels = df.pop("target")
    df = {key: value[:, tf.newaxis] for key, value in df.items()}
    ds = tf.data.Dataset.from_tensor_slices((dict(df), labels))
    if shuffle:
        ds = ds.shuffle(buffer_size=len(labels))
    ds = ds.batch(batch_size)
    ds = ds.prefetch(batch_size)
    return ds


def get_normalization_layer(name, dataset):
    # Create a Normalization layer for the feature.
    normalizer = layers.Normalization(axis=None)

    # Prepare a Dataset that only yields the feature.
    feature_ds = dataset.map(lambda x, y: x[name])

    # Learn the statistics of the data.
    normalizer.adapt(feature_ds)

    return normalizer


def get_category_encoding_layer(name, dataset, dtype, max_tokens=None):
    # Create a layer that turns strings into integer indices.
    if dtype == "string":
        index = layers.StringLookup(max_tokens=max_tokens)
    # Otherwise, create a layer that turns integer values into integer indices.
    else:
        index = layers.IntegerLookup(max_tokens=max_tokens)

    # Prepare a `tf.data.Dataset` that only yields the feature.
    feature_ds = dataset.map(lambda x, y: x[name])

    # Learn the set of possible values and assign them a fixed integer index.
    index.adapt(feature_ds)

    # Encode the integer indices.
    encoder = layers.CategoryEncoding(num_tokens=index.vocabulary_size())

    # Apply multi-hot encoding to the indices. The lambda function captures the
    # layer, so you can use them, or include them in the Keras Functional model later.
    return lambda feature: encoder(index(feature))


batch_size = 256
train_ds = df_to_dataset(train, batch_size=batch_size)
val_ds = df_to_dataset(val, shuffle=False, batch_size=batch_size)
test_ds = df_to_dataset(test, shuffle=False, batch_size=batch_size)

all_inputs = []
encoded_features = []

# Numerical features.
for header in ["PhotoAmt", "Fee"]:
    numeric_col = tf.keras.Input(shape=(1,), name=header)
    normalization_layer = get_normalization_layer(header, train_ds)
    encoded_numeric_col = normalization_layer(numeric_col)
    all_inputs.append(numeric_col)
    encoded_features.append(encoded_numeric_col)

age_col = tf.keras.Input(shape=(1,), name="Age", dtype="int64")

encoding_layer = get_category_encoding_layer(name="Age", dataset=train_ds, dtype="int64", max_tokens=5)
encoded_age_col = encoding_layer(age_col)
all_inputs.append(age_col)
encoded_features.append(encoded_age_col)

categorical_cols = [
    "Type",
    "Color1",
    "Color2",
    "Gender",
    "MaturitySize",
    "FurLength",
    "Vaccinated",
    "Sterilized",
    "Health",
    "Breed1",
]

for header in categorical_cols:
    categorical_col = tf.keras.Input(shape=(1,), name=header, dtype="string")
    encoding_layer = get_category_encoding_layer(name=header, dataset=train_ds, dtype="string", max_tokens=5)
    encoded_categorical_col = encoding_layer(categorical_col)
    all_inputs.append(categorical_col)
    encoded_features.append(encoded_categorical_col)

all_features = tf.keras.layers.concatenate(encoded_features)
x = tf.keras.layers.Dense(32, activation="relu")(all_features)
x = tf.keras.layers.Dropout(0.5)(x)
output = tf.keras.layers.Dense(1)(x)

model = tf.keras.Model(all_inputs, output)

model.compile(
    optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True), metrics=["accuracy"]
)

model.fit(train_ds, epochs=10, validation_data=val_ds)

result = model.evaluate(test_ds, return_dict=True)
print(result)
