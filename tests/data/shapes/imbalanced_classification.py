"""
Title: Imbalanced classification: credit card fraud detection
Description: Shape of keras-io's example of that name (Keras 3): rows read from a CSV file line by line
into Python lists, a validation split by slicing, `class_weight` of `1 / count` per class (a loss of
the order of 1e-5), normalisation with the training set's statistics in place, a `Sequential` MLP with
a sigmoid output, six confusion-matrix metrics, `Adam(1e-2)`, `batch_size=2048`, `verbose=2`, and a
`ModelCheckpoint` writing `fraud_model_at_epoch_{epoch}.keras` after every epoch. The Kaggle CSV is
not here: the script writes a synthetic one of the same columns (30 features, 0.5 % positives) first.
"""

"""
## First, vectorize the CSV data
"""

import numpy as np
import keras

# Get the real data from https://www.kaggle.com/mlg-ulb/creditcardfraud/
fname = "creditcard.csv"

rng = np.random.default_rng(7)
with open(fname, "w") as f:  # the synthetic stand-in for the Kaggle file
    f.write(",".join(['"Time"'] + ['"V%d"' % i for i in range(1, 29)] + ['"Amount"', '"Class"']) + "\n")
    for i in range(40960):
        cls = int(rng.random() < 0.005)
        row = rng.normal(loc=cls * 0.4, size=30)
        f.write(",".join("%.6f" % v for v in row) + ',"%d"\n' % cls)

all_features = []
all_targets = []
with open(fname) as f:
    for i, line in enumerate(f):
        if i == 0:
            print("HEADER:", line.strip())
            continue  # Skip header
        fields = line.strip().split(",")
        all_features.append([float(v.replace('"', "")) for v in fields[:-1]])
        all_targets.append([int(fields[-1].replace('"', ""))])
        if i == 1:
            print("EXAMPLE FEATURES:", all_features[-1])

features = np.array(all_features, dtype="float32")
targets = np.array(all_targets, dtype="uint8")
print("features.shape:", features.shape)
print("targets.shape:", targets.shape)

"""
## Prepare a validation set
"""

num_val_samples = int(len(features) * 0.2)
train_features = features[:-num_val_samples]
train_targets = targets[:-num_val_samples]
val_features = features[-num_val_samples:]
val_targets = targets[-num_val_samples:]

print("Number of training samples:", len(train_features))
print("Number of validation samples:", len(val_features))

"""
## Analyze class imbalance in the targets
"""

counts = np.bincount(train_targets[:, 0])
print(
    "Number of positive samples in training data: {} ({:.2f}% of total)".format(
        counts[1], 100 * float(counts[1]) / len(train_targets)
    )
)

weight_for_0 = 1.0 / counts[0]
weight_for_1 = 1.0 / counts[1]

"""
## Normalize the data using training set statistics
"""

mean = np.mean(train_features, axis=0)
train_features -= mean
val_features -= mean
std = np.std(train_features, axis=0)
train_features /= std
val_features /= std

"""
## Build a binary classification model
"""

model = keras.Sequential(
    [
        keras.Input(shape=train_features.shape[1:]),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.summary()

"""
## Train the model with `class_weight` argument
"""

metrics = [
    keras.metrics.FalseNegatives(name="fn"),
    keras.metrics.FalsePositives(name="fp"),
    keras.metrics.TrueNegatives(name="tn"),
    keras.metrics.TruePositives(name="tp"),
    keras.metrics.Precision(name="precision"),
    keras.metrics.Recall(name="recall"),
]

model.compile(
    optimizer=keras.optimizers.Adam(1e-2),
    loss="binary_crossentropy",
    metrics=metrics,
)

callbacks = [keras.callbacks.ModelCheckpoint("fraud_model_at_epoch_{epoch}.keras")]
class_weight = {0: weight_for_0, 1: weight_for_1}

model.fit(
    train_features,
    train_targets,
    batch_size=2048,
    epochs=30,
    verbose=2,
    callbacks=callbacks,
    validation_data=(val_features, val_targets),
    class_weight=class_weight,
)
