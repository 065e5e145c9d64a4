"""Drop-based learning rate decay, as machinelearningmastery's "Using Learning Rate Schedules for Deep
Learning Models in Python with Keras" writes it (the ionosphere MLP), with synthetic data of the same
width in place of the downloaded CSV."""

import math

import numpy as np
from tensorflow.keras.callbacks import LearningRateScheduler
from tensorflow.keras.layers import Dense
from tensorflow.keras.models import Sequential
from tensorflow.keras.optimizers import SGD


# learning rate schedule
def step_decay(epoch):
    initial_lrate = 0.1
    drop = 0.5
    epochs_drop = 10.0
    lrate = initial_lrate * math.pow(drop, math.floor((1 + epoch) / epochs_drop))
    return lrate


# load dataset
rng = np.random.default_rng(7)
X = rng.normal(size=(20000, 34)).astype("float32")
w = rng.normal(size=(34,))
Y = (X @ w + 0.5 * rng.normal(size=20000) > 0).astype("float32")
# create model
model = Sequential()
model.add(Dense(34, input_shape=(34,), activation="relu"))
model.add(Dense(1, activation="sigmoid"))
# Compile model
sgd = SGD(learning_rate=0.0, momentum=0.9)
model.compile(loss="binary_crossentropy", optimizer=sgd, metrics=["accuracy"])
# learning schedule callback
lrate = LearningRateScheduler(step_decay)
callbacks_list = [lrate]
# Fit the model
model.fit(X, Y, validation_split=0.33, epochs=50, batch_size=28, callbacks=callbacks_list, verbose=2)
