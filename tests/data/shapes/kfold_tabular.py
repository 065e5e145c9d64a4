"""The shape of Kaggle tabular notebooks that train a Keras MLP with K-fold cross-validation: a
``build_model()`` called once per fold after ``K.clear_session()``, ``fit`` on the fold's numpy rows with
``validation_data``, ``batch_size=BATCH_SIZE``, ``EarlyStopping`` + ``ReduceLROnPlateau`` and a
per-fold ``ModelCheckpoint``, then out-of-fold predictions and a CV score. Synthetic rows instead of a
competition's CSV; a numpy fold split instead of scikit-learn's ``KFold``.

    python kfold_tabular.py
"""

import os

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import backend as K
from tensorflow.keras import layers

SEED = 42
N_FOLDS = 3
EPOCHS = 4
BATCH_SIZE = 256
LR = 1e-3
N_FEATURES = 64

np.random.seed(SEED)
tf.random.set_seed(SEED)

# --- data -------------------------------------------------------------------------------------------
N_ROWS = 24000
X = np.random.normal(size=(N_ROWS, N_FEATURES)).astype("float32")
w = np.random.normal(size=(N_FEATURES,)).astype("float32")
y = (X @ w + 0.5 * np.sin(X[:, 0] * 3) > 0).astype("float32")

# standardise (as the notebooks do with a StandardScaler)
X = (X - X.mean(axis=0)) / X.std(axis=0)


def kfold_split(n, n_splits, seed):
    idx = np.random.default_rng(seed).permutation(n)
    folds = np.array_split(idx, n_splits)
    for k in range(n_splits):
        va = folds[k]
        tr = np.concatenate([folds[j] for j in range(n_splits) if j != k])
        yield tr, va


def build_model():
    inp = layers.Input(shape=(N_FEATURES,))
    x = layers.Dense(512, activation="swish")(inp)
    x = layers.BatchNormalization()(x)
    x = layers.Dropout(0.3)(x)
    x = layers.Dense(256, activation="swish")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Dropout(0.3)(x)
    x = layers.Dense(128, activation="swish")(x)
    out = layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inp, out)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=LR),
        loss="binary_crossentropy",
        metrics=[keras.metrics.AUC(name="auc")],
    )
    return model


os.makedirs("models", exist_ok=True)
oof = np.zeros(N_ROWS)
for fold, (tr_idx, va_idx) in enumerate(kfold_split(N_ROWS, N_FOLDS, SEED)):
    print("#" * 25)
    print(f"### FOLD {fold + 1}")
    print("#" * 25)
    K.clear_session()
    model = build_model()
    callbacks = [
        keras.callbacks.EarlyStopping(monitor="val_auc", mode="max", patience=3, restore_best_weights=True),
        keras.callbacks.ReduceLROnPlateau(monitor="val_auc", mode="max", factor=0.5, patience=1),
        keras.callbacks.ModelCheckpoint(f"models/fold-{fold}.weights.h5", save_best_only=True, save_weights_only=True),
    ]
    history = model.fit(
        X[tr_idx],
        y[tr_idx],
        validation_data=(X[va_idx], y[va_idx]),
        batch_size=BATCH_SIZE,
        epochs=EPOCHS,
        callbacks=callbacks,
        verbose=2,
    )
    oof[va_idx] = model.predict(X[va_idx], batch_size=BATCH_SIZE * 4, verbose=0).ravel()
    acc = ((oof[va_idx] > 0.5) == y[va_idx]).mean()
    print(f"Fold {fold + 1} accuracy: {acc:.4f}")

print(f"CV accuracy: {((oof > 0.5) == y).mean():.4f}")
